"""Result tables, compare, report and the CI gate."""
