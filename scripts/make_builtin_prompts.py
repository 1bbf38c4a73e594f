#!/usr/bin/env python3
"""Generate the built-in training prompt set (builtin.jsonl) next to this file.

The prompts are produced combinatorially from hand-written templates, topic lists
and numeric parameters. Everything is deterministic: the only randomness comes
from ``random.Random(SEED)``, so running the script twice yields identical output.

The content is deliberately disjoint from the benchmark suites in
``bench/suites/``: different topics, different passages and different wording.
Only the Python standard library is used.

Usage:  python3 scripts/make_builtin_prompts.py
"""

import json
import os
import random
import re

SEED = 20240611
TARGETS = {  # prompts per category (all must be reached)
    "chat": 520,
    "code": 460,
    "math": 420,
    "summarization": 360,
    "translation": 400,
    "qa": 360,
}
OUT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "train", "prompts", "builtin.jsonl")

# ---------------------------------------------------------------------------
# Shared vocab
# ---------------------------------------------------------------------------

FIRST_NAMES = [
    "Aiko", "Bruno", "Chiara", "Dmitri", "Esme", "Farid", "Greta", "Hugo", "Imani",
    "Jonas", "Kavya", "Lucas", "Maren", "Nikhil", "Odile", "Pavel", "Quinn", "Rania",
    "Stellan", "Tamsin", "Ulla", "Viktor", "Wren", "Yusuf", "Zora", "Anika", "Bastien",
    "Celeste", "Dario", "Elif", "Felix", "Gemma", "Hamza", "Ines", "Jasper", "Keiko",
]
SURNAMES = [
    "Abernathy", "Bellamy", "Castellano", "Drummond", "Eklund", "Fairbanks", "Galloway",
    "Holloway", "Iversen", "Jablonski", "Kowalczyk", "Lindqvist", "Moreau", "Nakamura",
    "Ostrowski", "Pemberton", "Quintero", "Rasmussen", "Sorensen", "Thibault",
]
TOWNS = [
    "Ashcombe", "Brackenridge", "Coldwater Bay", "Dunmere", "Elmsworth", "Fallowfield",
    "Glenrock", "Hollinsby", "Ironbridge Falls", "Juniper Hollow", "Kelvedon",
    "Larkspur", "Marlow Heath", "Northcombe", "Oakhaven", "Pebblebrook", "Quarry Hill",
    "Redfern", "Saltmarsh", "Thornbury", "Upton Vale", "Wexcombe", "Yarrowby",
]
MONTHS = ["January", "February", "March", "April", "May", "June", "July",
          "August", "September", "October", "November", "December"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def norm(text):
    return re.sub(r"\s+", " ", text.strip().lower())


def pick(rng, seq):
    return seq[rng.randrange(len(seq))]


def person(rng):
    return f"{pick(rng, FIRST_NAMES)} {pick(rng, SURNAMES)}"


# ---------------------------------------------------------------------------
# Chat / advice / writing
# ---------------------------------------------------------------------------

ADVICE_TOPICS = [
    "keeping houseplants alive in an apartment with little sunlight",
    "sticking to a monthly grocery budget",
    "preparing for a first ten-kilometer race",
    "learning to cook healthy meals in under thirty minutes",
    "decluttering a small bedroom",
    "staying focused while studying at home",
    "getting back into reading books regularly",
    "negotiating a salary for a first job",
    "organizing digital photos from many years",
    "building a habit of journaling",
    "preparing a house for a cold winter",
    "hosting a game night for coworkers",
    "making a long car journey with toddlers bearable",
    "choosing a first electric guitar",
    "starting a vegetable patch on a balcony",
    "reducing time spent scrolling on the phone",
    "writing a clear cover letter",
    "planning a budget-friendly weekend camping trip",
    "learning to touch-type",
    "keeping a sourdough starter healthy",
    "introducing a new kitten to an older cat",
    "sleeping better after night shifts",
    "caring for a leather jacket",
    "running an efficient volunteer meeting",
    "preparing for a driving test",
    "packing light for a two-week trip",
    "saving for a down payment on a home",
    "teaching a teenager to manage pocket money",
    "staying in touch with friends who live abroad",
    "learning to sketch with a pencil",
    "setting up a quiet home office in a shared flat",
    "choosing a good pair of hiking boots",
    "getting comfortable with public speaking",
    "cooking rice that is not sticky",
    "keeping a bicycle in good condition",
    "starting a small book club",
    "making a weekly meal plan for a family of four",
    "learning basic sign language",
    "staying safe while hiking alone",
    "helping an elderly parent use a smartphone",
    "preparing for a job interview over video",
    "looking after a friend's plants while they travel",
    "writing a personal statement for a scholarship",
    "brewing good coffee with a French press",
    "getting started with birdwatching",
    "organizing a neighborhood litter pick",
    "taking care of a lawn without chemicals",
    "improving handwriting as an adult",
    "choosing a first pet fish",
    "managing stress during exam season",
    "learning to juggle three balls",
    "making a small kitchen feel larger",
    "keeping track of household paperwork",
    "setting boundaries with a talkative coworker",
]

ADVICE_TEMPLATES = [
    "Give me {n} practical tips for {t}.",
    "What are the most common mistakes people make when {t}, and how can they be avoided?",
    "I'm a complete beginner at {t}. Where should I start?",
    "Write a short checklist for {t}.",
    "In a friendly tone, explain how someone could get noticeably better at {t} within a month.",
    "Create a simple one-week plan for someone who wants to improve at {t}.",
    "What tools or supplies, if any, are useful for {t}? Keep the list short and explain each item.",
    "My friend thinks {t} is not worth the effort. Give a balanced view of the benefits and costs.",
    "Summarize the best advice you know about {t} in exactly {n} bullet points.",
]

CONCEPTS = [
    "how vaccines train the immune system", "why leaves change color in autumn",
    "what a credit score is and how it is calculated", "how a refrigerator keeps food cold",
    "why the moon has phases", "how a bicycle stays upright while moving",
    "what supply and demand means", "how rainbows form", "why bread rises",
    "how GPS works out your location", "what a carbon footprint is",
    "why we have leap years", "how a mortgage works", "how tides are caused by the moon",
    "what the greenhouse effect is", "how a microwave oven heats food",
    "how the heart pumps blood around the body", "what an index fund is",
    "why ice floats on water", "how elections are counted in a first-past-the-post system",
    "how solar panels turn light into electricity", "why some people are allergic to pollen",
    "how a search engine decides which pages to show", "what jet lag is and why it happens",
    "how recycling of aluminium cans works", "why time zones exist",
    "how bees make honey", "what a budget deficit is",
    "how an electric car's regenerative braking works", "why the ocean is salty",
    "how earthquakes are measured", "what photosynthesis does",
    "how a lock and key work", "why we yawn", "how a thermostat controls temperature",
    "what insurance premiums and deductibles are", "why stars twinkle",
    "how fermentation turns cabbage into sauerkraut", "what a patent protects",
    "how echoes happen", "why metal feels colder than wood at the same temperature",
]
AUDIENCES = [
    "a ten-year-old", "a busy executive with two minutes to spare", "a high school student",
    "someone who has never studied science", "my grandmother", "a curious teenager",
    "a new employee with no background in the subject", "a friend over coffee",
]
EXPLAIN_TEMPLATES = [
    "Explain {c} to {a}.",
    "In under 150 words, explain {c} for {a}.",
    "Using one everyday analogy, explain {c} to {a}.",
    "Explain {c} to {a}, then give one common misconception about it.",
]

WRITING_FORMS = [
    "a haiku", "a limerick", "an eight-line rhyming poem", "a two-paragraph short story",
    "a diary entry", "a bedtime story", "a motivational speech of about 100 words",
    "a letter to a future self", "a fable with a moral", "a short dialogue between two characters",
    "a free-verse poem", "a newspaper-style headline and opening paragraph",
]
WRITING_SUBJECTS = [
    "a lost umbrella finding its way home", "a robot learning to paint",
    "the last day of summer holidays", "a lighthouse keeper's cat",
    "a city during a power cut", "an old bicycle in a shed", "the first cup of coffee of the day",
    "a squirrel planning a heist", "a shy dragon", "moving into a new flat",
    "a grandmother teaching her grandson to fish", "a forgotten library book",
    "a train station at midnight", "a garden gnome who wants to travel",
    "a chess game between friends", "the sound of rain on a tin roof",
    "a baker who oversleeps", "an astronaut's first morning in orbit",
    "a dog waiting at the window", "a kite caught in a tree",
    "a town where it never stops snowing", "a violin that plays by itself",
    "a mistaken identity at a wedding", "a road trip with a broken radio",
    "the oldest tree in the park", "a detective who is afraid of the dark",
]

MESSAGE_SITUATIONS = [
    "asking a professor for a short extension on a lab report",
    "thanking a mentor after getting a promotion",
    "apologizing to a friend for missing their birthday dinner",
    "inviting neighbors to a street party",
    "declining a job offer while keeping the door open",
    "asking a colleague to cover a shift next Friday",
    "reminding a client about an unpaid invoice",
    "welcoming a new member to a hiking club",
    "requesting a refund for a damaged parcel",
    "congratulating a cousin on finishing university",
    "telling a team that a project deadline has moved",
    "asking a landlord for permission to get a cat",
    "recommending a former intern for a new job",
    "cancelling a gym membership",
    "asking a neighbor to trim an overhanging hedge",
    "following up after a networking event",
    "requesting a day off for a family event",
    "introducing two acquaintances who work in the same field",
    "responding to a customer who received the wrong size shoes",
    "asking a teacher about a child's progress in maths",
    "inviting a speaker to talk at a school career day",
    "informing book club members of a venue change",
]
TONES = ["formal", "friendly", "concise", "warm but professional", "light-hearted"]

DECISIONS = [
    ("renting", "buying a home in my twenties"),
    ("taking a gap year", "going straight to university"),
    ("a standing desk", "a regular desk"),
    ("learning Python", "learning JavaScript as a first programming language"),
    ("adopting a dog", "adopting a cat as a first pet"),
    ("an e-reader", "paper books"),
    ("a city break", "a beach holiday"),
    ("cycling to work", "taking the bus"),
    ("a part-time master's degree", "a full-time one"),
    ("a freelance career", "a salaried job"),
    ("cooking in bulk on Sundays", "cooking fresh every evening"),
    ("a used car", "a new car"),
    ("joining a gym", "exercising at home"),
    ("a group tour", "independent travel"),
    ("a paper planner", "a calendar app"),
]
DECISION_TEMPLATES = [
    "What are the pros and cons of {a} versus {b}?",
    "Help me decide between {a} and {b}. Ask me no questions; just lay out what should drive the choice.",
    "Make a comparison table of {a} versus {b}, then give a short recommendation for a typical person.",
]


def gen_chat(rng):
    out = []
    for t in ADVICE_TOPICS:
        for tpl in ADVICE_TEMPLATES:
            out.append(tpl.format(t=t, n=pick(rng, [3, 4, 5, 6, 7])))
    for c in CONCEPTS:
        for tpl in EXPLAIN_TEMPLATES:
            out.append(tpl.format(c=c, a=pick(rng, AUDIENCES)))
    for form in WRITING_FORMS:
        for subj in WRITING_SUBJECTS:
            out.append(f"Write {form} about {subj}.")
    for sit in MESSAGE_SITUATIONS:
        for tone in TONES:
            out.append(f"Draft a {tone} message {sit}.")
    for a, b in DECISIONS:
        for tpl in DECISION_TEMPLATES:
            out.append(tpl.format(a=a, b=b))
    return out


# ---------------------------------------------------------------------------
# Code
# ---------------------------------------------------------------------------

FUNC_TASKS = [
    "returns the n-th Fibonacci number using iteration rather than recursion",
    "checks whether a string is a palindrome, ignoring spaces, punctuation and case",
    "computes the greatest common divisor of two integers with Euclid's algorithm",
    "converts a number of seconds into a human-readable string such as '2h 5m 9s'",
    "returns the most common element in a list, breaking ties by first appearance",
    "rotates a square matrix by 90 degrees clockwise",
    "counts the vowels in a string",
    "checks whether a year is a leap year",
    "splits a list into two lists of even and odd numbers",
    "capitalizes the first letter of every word in a sentence",
    "returns all prime numbers below a given limit using the sieve of Eratosthenes",
    "computes the running average of a stream of numbers",
    "validates that a string of brackets like '([]{})' is balanced",
    "converts a decimal integer to its binary representation as a string without built-in helpers",
    "removes consecutive duplicate characters from a string, so 'aabccc' becomes 'abc'",
    "finds the longest common prefix of a list of strings",
    "computes the Levenshtein edit distance between two strings",
    "returns the k largest numbers in a list in descending order",
    "transposes a matrix represented as a list of rows",
    "parses a query string like 'a=1&b=two' into a dictionary or map",
    "formats a large integer with thousands separators, e.g. 1234567 to '1,234,567'",
    "checks whether two rectangles given by corner coordinates overlap",
    "computes the median of an unsorted list of numbers",
    "encodes a string using run-length encoding, e.g. 'aaab' to 'a3b1'",
    "returns the day of the week for a given date string in YYYY-MM-DD format",
    "generates all subsets of a small list",
    "counts how many times each word appears in a text and returns the top three",
    "implements a simple stack with push, pop and peek operations",
    "checks whether a number is an Armstrong number",
    "computes the dot product of two vectors of equal length",
    "truncates a string to a maximum length and appends an ellipsis if it was cut",
    "converts a snake_case identifier to camelCase",
    "returns the index of the maximum value in a list without using built-in max helpers",
    "shuffles a list in place using the Fisher-Yates algorithm",
    "checks whether a string is a valid IPv4 address",
    "calculates compound interest given principal, rate, periods and years",
    "merges two sorted lists into one sorted list in linear time",
    "computes the factorial of n and handles negative input with an error",
    "finds the first non-repeating character in a string",
    "implements a queue using two stacks",
    "returns the sum of the digits of a non-negative integer",
    "pads each line of a multi-line string so all lines have equal width",
    "checks whether a singly linked list contains a cycle",
    "converts a hex colour like '#1a2b3c' into an RGB triple",
    "groups a list of words by their first letter",
]
LANGS = ["Python", "JavaScript", "TypeScript", "Go", "Rust", "Java", "C#", "Ruby", "Kotlin", "C++"]
TEST_FRAMEWORKS = {
    "Python": "pytest", "JavaScript": "Jest", "TypeScript": "Vitest", "Go": "the testing package",
    "Rust": "the built-in #[test] attribute", "Java": "JUnit 5", "C#": "xUnit", "Ruby": "RSpec",
    "Kotlin": "kotlin.test", "C++": "GoogleTest",
}
CODE_TEMPLATES = [
    "Write a {lang} function that {task}.",
    "Implement a {lang} function that {task}. Add comments explaining each step.",
    "Write a {lang} function that {task}, and list the edge cases it handles.",
    "Write tests using {fw} for a {lang} function that {task}.",
    "Show an idiomatic {lang} solution for a function that {task}, and state its time and space complexity.",
    "I need a {lang} function that {task}. Give the code and two example calls with their expected output.",
]

SQL_SCHEMAS = [
    ("books(id, title, author_id, published_year, price) and authors(id, name, country)", [
        "list each author with the number of books they have published",
        "find the average book price per country of the author",
        "return the titles of books published in the most recent year in the table",
        "find authors who have no books in the table",
        "list the three most expensive books along with their author names",
    ]),
    ("flights(id, origin, destination, departure_time, seats_sold, capacity)", [
        "find routes whose average load factor (seats_sold / capacity) is below 50 percent",
        "count the flights departing from each origin per day",
        "list the busiest destination for each month",
        "find flights that were overbooked",
        "return the route with the highest total number of seats sold",
    ]),
    ("patients(id, name, birth_date) and visits(id, patient_id, visit_date, department)", [
        "find patients who visited more than three different departments",
        "list the number of visits per department for the last 30 days",
        "find each patient's most recent visit date",
        "list patients who have never visited the cardiology department",
        "compute the average age of patients per department",
    ]),
    ("products(id, name, category, price) and inventory(product_id, warehouse, quantity)", [
        "find products that are out of stock in every warehouse",
        "compute the total stock value per warehouse",
        "list categories whose total quantity is above 1000",
        "find the warehouse holding the most units of each product",
        "return products whose price is above the average price of their category",
    ]),
    ("rides(id, rider_id, driver_id, started_at, ended_at, fare) and drivers(id, name, city)", [
        "compute each driver's total earnings for the current month",
        "find the average ride duration in minutes per city",
        "list drivers who completed no rides last week",
        "find the hour of the day with the most rides started",
        "rank drivers within each city by number of rides",
    ]),
    ("events(id, user_id, event_type, created_at)", [
        "count daily active users for the last 14 days",
        "find users who signed up but never made a purchase, assuming event types 'signup' and 'purchase'",
        "compute the number of days between each user's first and last event",
        "find the most common event type per weekday",
        "compute a seven-day rolling count of 'login' events",
    ]),
    ("tickets(id, customer_id, opened_at, closed_at, priority, agent_id)", [
        "compute the median resolution time per priority",
        "list agents with more than 20 open tickets",
        "find customers who opened more than five tickets in a single week",
        "count tickets still open for more than seven days",
        "show the share of tickets closed within 24 hours per agent",
    ]),
    ("courses(id, title, credits) and enrollments(student_id, course_id, semester, grade)", [
        "list courses with fewer than five students in the latest semester",
        "compute each student's total credits earned with a passing grade",
        "find the course with the highest failure rate",
        "list students enrolled in more than four courses in one semester",
        "compute the grade distribution for each course",
    ]),
]
SQL_DIALECTS = ["PostgreSQL", "SQLite", "MySQL", "standard SQL"]
SQL_TEMPLATES = [
    "Given the tables {schema}, write a {dialect} query to {q}.",
    "Using {dialect} and the schema {schema}, write a query to {q}. Explain how the query works.",
]

SHELL_TASKS = [
    "renames every .jpeg file in the current folder to use the .jpg extension",
    "prints the total disk usage of each subdirectory, sorted from largest to smallest",
    "counts the lines of code in all .go files in a project, excluding vendor folders",
    "backs up a directory into a timestamped tar.gz archive",
    "checks every minute whether a website returns HTTP 200 and logs failures",
    "deletes empty directories below the current folder",
    "finds the five largest files in a home directory",
    "prints the lines that appear in one text file but not in another",
    "converts all file names in a folder to lowercase",
    "monitors a log file and prints lines containing the word ERROR as they appear",
    "extracts the unique email addresses from a text file",
    "lists all processes using more than 500 MB of memory",
    "replaces tabs with four spaces in every .txt file in a folder",
    "downloads a list of URLs from a file, three at a time in parallel",
    "prints the number of git commits per author in a repository",
    "splits a large CSV file into chunks of 10,000 lines each, keeping the header in every chunk",
    "warns when free disk space on the root partition drops below 10 percent",
    "creates a directory structure for a new project with src, tests and docs folders",
]
SHELLS = ["bash", "POSIX sh", "zsh", "PowerShell"]

CODE_CONCEPTS = [
    "what a closure is", "the difference between a process and a thread",
    "what immutability means and why it helps", "how garbage collection works at a high level",
    "what dependency injection is", "the difference between an interface and an abstract class",
    "what a hash map is and why lookups are fast on average", "what recursion is and when to avoid it",
    "what an off-by-one error is", "how async/await differs from using threads",
    "what a memory leak is", "what pure functions are", "what big-O notation describes",
    "what a REST API is", "the difference between unit tests and integration tests",
    "what a database index is and when it hurts performance", "what semantic versioning means",
    "what a null pointer exception is and how to prevent it",
    "what the single responsibility principle says", "what a deadlock is",
    "how a git rebase differs from a merge", "what a regular expression lookahead does",
    "what an enum is good for", "what caching is and what cache invalidation problems look like",
]
CONCEPT_TEMPLATES = [
    "Explain {c}, with a short example in {lang}.",
    "For a junior developer, explain {c}. Use {lang} for any code.",
]

BUGGY_SNIPPETS = [
    ("Python", "def average(values):\n    total = 0\n    for v in values:\n        total += v\n    return total / len(values) - 1",
     "It should return the mean of the list."),
    ("Python", "def last_n(items, n):\n    return items[-n:]\n\nprint(last_n([1, 2, 3], 0))",
     "Calling it with n=0 should return an empty list."),
    ("JavaScript", "function sumPrices(items) {\n  let total;\n  items.forEach(i => { total += i.price; });\n  return total;\n}",
     "It returns NaN instead of the total."),
    ("JavaScript", "const nums = [10, 1, 5, 100];\nnums.sort();\nconsole.log(nums);",
     "The numbers should be sorted in ascending numeric order."),
    ("Python", "def count_down(n):\n    while n > 0:\n        print(n)\n    print('liftoff')",
     "The loop never ends."),
    ("Python", "import datetime\n\ndef days_until(date_str):\n    target = datetime.datetime.strptime(date_str, '%Y-%d-%m')\n    return (target - datetime.datetime.now()).days",
     "Dates like '2025-12-31' fail to parse."),
    ("Go", "func sum(xs []int) int {\n    total := 0\n    for i := 1; i < len(xs); i++ {\n        total += xs[i]\n    }\n    return total\n}",
     "The result is always too small."),
    ("JavaScript", "async function getUser(id) {\n  const res = fetch(`/api/users/${id}`);\n  return res.json();\n}",
     "It throws 'res.json is not a function'."),
    ("Python", "def is_even(n):\n    return n % 2 == 1\n\nprint(is_even(4))",
     "It prints False for 4."),
    ("Java", "String a = new String(\"hi\");\nString b = new String(\"hi\");\nif (a == b) {\n    System.out.println(\"equal\");\n}",
     "Nothing is printed even though both strings are 'hi'."),
    ("Python", "def append_row(table, row):\n    table = table + [row]\n\ndata = []\nappend_row(data, [1, 2])\nprint(data)",
     "The caller's list stays empty."),
    ("Rust", "fn main() {\n    let v = vec![1, 2, 3];\n    let w = v;\n    println!(\"{:?}\", v);\n}",
     "It does not compile."),
    ("SQL", "SELECT customer_id, COUNT(*)\nFROM orders\nWHERE COUNT(*) > 5\nGROUP BY customer_id;",
     "The database reports an error about aggregate functions."),
    ("bash", "for f in $(ls *.txt); do\n  wc -l $f\ndone",
     "It breaks on file names that contain spaces."),
    ("Python", "prices = {'apple': 1.2, 'pear': 0.8}\nfor name in prices:\n    if prices[name] < 1:\n        del prices[name]",
     "It raises a RuntimeError."),
    ("JavaScript", "const user = { name: 'Ada' };\nconst copy = user;\ncopy.name = 'Grace';\nconsole.log(user.name);",
     "The original object should still say 'Ada'."),
]
BUG_TEMPLATES = [
    "This {lang} code has a bug. {symptom} Find the problem and fix it.\n\n```\n{code}\n```",
    "Explain what is wrong with the following {lang} snippet and show a corrected version. {symptom}\n\n```\n{code}\n```",
]


def gen_code(rng):
    out = []
    for task in FUNC_TASKS:
        langs = list(LANGS)
        rng.shuffle(langs)
        for tpl, lang in zip(CODE_TEMPLATES, langs):
            out.append(tpl.format(lang=lang, task=task, fw=TEST_FRAMEWORKS[lang]))
    for schema, questions in SQL_SCHEMAS:
        for q in questions:
            for tpl in SQL_TEMPLATES:
                out.append(tpl.format(schema=schema, q=q, dialect=pick(rng, SQL_DIALECTS)))
    for task in SHELL_TASKS:
        shells = list(SHELLS)
        rng.shuffle(shells)
        out.append(f"Write a {shells[0]} script that {task}.")
        out.append(f"Write a {shells[1]} command or short script that {task}, and explain each part.")
    for c in CODE_CONCEPTS:
        for tpl in CONCEPT_TEMPLATES:
            out.append(tpl.format(c=c, lang=pick(rng, LANGS)))
    for lang, code, symptom in BUGGY_SNIPPETS:
        for tpl in BUG_TEMPLATES:
            out.append(tpl.format(lang=lang, code=code, symptom=symptom))
    return out


# ---------------------------------------------------------------------------
# Math (parametric word problems + a few proofs)
# ---------------------------------------------------------------------------

MATH_SUFFIXES = [
    "Show your work.",
    "Explain each step before giving the answer.",
    "Work through it carefully and give the final answer at the end.",
    "Think it through step by step.",
    "Write out the calculation clearly.",
]
ITEMS = [("pencils", "pencil"), ("apples", "apple"), ("tickets", "ticket"),
         ("notebooks", "notebook"), ("candles", "candle"), ("stamps", "stamp"),
         ("cupcakes", "cupcake"), ("plant pots", "plant pot")]


def m_shop(rng):
    n = pick(rng, FIRST_NAMES)
    (pl, sg), (pl2, sg2) = rng.sample(ITEMS, 2)
    a, b = rng.randint(2, 12), rng.randint(2, 9)
    pa, pb = rng.randint(2, 15) / 2, rng.randint(3, 25) / 4
    paid = pick(rng, [50, 100])
    return (f"{n} buys {a} {pl} at ${pa:.2f} each and {b} {pl2} at ${pb:.2f} each, "
            f"paying with a ${paid} bill. How much change should {n} receive?")


def m_speed(rng):
    d = rng.randint(6, 60) * 5
    v1, v2 = rng.randint(8, 20) * 5, rng.randint(8, 20) * 5
    return (f"A cyclist and a car start at the same time from towns {d} km apart and travel toward "
            f"each other. The cyclist averages {v1 // 5} km/h and the car averages {v2} km/h. "
            f"After how many minutes do they meet?")


def m_percent(rng):
    n = pick(rng, FIRST_NAMES)
    sal = rng.randint(18, 90) * 1000
    r1, r2 = rng.randint(2, 9), rng.randint(2, 9)
    return (f"{n}'s annual salary of ${sal:,} rises by {r1}% one year and by {r2}% the next. "
            f"What is the salary after both raises, and by what total percentage has it grown?")


def m_ratio(rng):
    a, b = rng.randint(2, 7), rng.randint(2, 7)
    total = (a + b) * rng.randint(3, 30)
    x, y = rng.sample(FIRST_NAMES, 2)
    return (f"{x} and {y} share {total} stickers in the ratio {a}:{b}. How many more stickers "
            f"does the person with the larger share get?")


def m_area(rng):
    l, w = rng.randint(4, 20), rng.randint(3, 15)
    tile = pick(rng, [20, 25, 30, 40, 50])
    return (f"A room measures {l} m by {w} m. Square floor tiles are {tile} cm on each side. "
            f"How many tiles are needed to cover the floor, and how many boxes of 10 must be bought?")


def m_age(rng):
    x, y = rng.sample(FIRST_NAMES, 2)
    k = rng.randint(2, 4)
    young = rng.randint(4, 15)
    yrs = rng.randint(2, 12)
    return (f"{x} is {k} times as old as {y}. In {yrs} years, their ages will add up to "
            f"{(k + 1) * young + 2 * yrs}. How old is each of them now?")


def m_work(rng):
    a, b = rng.randint(3, 12), rng.randint(4, 15)
    job = pick(rng, ["paint a fence", "pack a shipment", "mow a field", "sort the mail", "clean a hall"])
    return (f"One worker can {job} in {a} hours and another can do it in {b} hours. "
            f"How long would it take them working together? Give the answer in hours and minutes.")


def m_mixture(rng):
    v1, c1 = rng.randint(2, 10), rng.randint(5, 30)
    v2, c2 = rng.randint(2, 10), rng.randint(35, 80)
    return (f"A chemist mixes {v1} liters of a {c1}% salt solution with {v2} liters of a {c2}% "
            f"salt solution. What is the concentration of the mixture?")


def m_prob(rng):
    r, b, g = rng.randint(2, 8), rng.randint(2, 8), rng.randint(1, 6)
    return (f"A box holds {r} red, {b} blue and {g} yellow balls. One ball is drawn at random, "
            f"replaced, and a second ball is drawn. What is the probability that the two balls are "
            f"different colors?")


def m_seq(rng):
    a, d, n = rng.randint(1, 20), rng.randint(2, 9), rng.randint(10, 40)
    return (f"An arithmetic sequence starts at {a} and increases by {d} each term. What is the "
            f"{n}th term, and what is the sum of the first {n} terms?")


def m_unit(rng):
    rate = rng.randint(2, 12)
    days = rng.randint(2, 9)
    return (f"A leaking tap drips {rate} milliliters every minute. How many liters of water are "
            f"wasted in {days} days if it is never fixed?")


def m_interest(rng):
    p = rng.randint(5, 80) * 100
    r = pick(rng, [1.5, 2, 2.5, 3, 3.5, 4, 5])
    y = rng.randint(2, 6)
    return (f"${p:,} is invested at {r}% simple interest for {y} years. How much interest is earned, "
            f"and how much more would be earned with annual compounding instead?")


def m_schedule(rng):
    a, b, c = rng.sample([4, 5, 6, 8, 9, 10, 12, 15], 3)
    return (f"Three buses leave a depot together at 7:00 am. They return to the depot every {a}, "
            f"{b} and {c} minutes respectively. When is the next time all three are at the depot "
            f"together?")


def m_temp(rng):
    start = rng.randint(-15, 5)
    rise = rng.randint(1, 4)
    hours = rng.randint(3, 10)
    return (f"At 06:00 the temperature was {start}°C. It rose by {rise} degrees every hour until "
            f"{6 + hours:02d}:00, then fell by half that rate for the next two hours. What was the "
            f"temperature at the end?")


def m_geometry(rng):
    r = rng.randint(2, 20)
    return (f"A circular pond has a radius of {r} meters. A gravel path 1 meter wide surrounds it. "
            f"What is the area of the path? Use pi ≈ 3.14.")


def m_discount(rng):
    price = rng.randint(20, 400)
    d = pick(rng, [10, 15, 20, 30, 40])
    tax = pick(rng, [5, 8, 10, 20])
    return (f"A lamp is priced at ${price}. It is on sale for {d}% off, and then a sales tax of "
            f"{tax}% is added to the sale price. What does the customer pay in total?")


def m_fuel(rng):
    km = rng.randint(8, 90) * 10
    eff = rng.randint(12, 25)
    cost = rng.randint(140, 220) / 100
    return (f"A van travels {km} km and gets {eff} km per liter of fuel. Fuel costs ${cost:.2f} per "
            f"liter. How much does the fuel for the trip cost?")


def m_average(rng):
    scores = [rng.randint(55, 98) for _ in range(rng.randint(3, 6))]
    target = rng.randint(75, 92)
    return (f"A student's test scores so far are {', '.join(map(str, scores))}. What score does she "
            f"need on the next test to bring her average to exactly {target}? Is it possible if the "
            f"maximum score is 100?")


def m_combin(rng):
    n = rng.randint(5, 12)
    k = rng.randint(2, min(5, n - 1))
    return (f"A club with {n} members must choose a committee of {k}. How many different committees "
            f"are possible? How many are possible if two particular members refuse to serve together?")


def m_coins(rng):
    a, b = rng.randint(5, 30), rng.randint(5, 30)
    return (f"A jar holds only 10-cent and 25-cent coins, {a + b} coins in all, worth "
            f"${(10 * a + 25 * b) / 100:.2f}. How many of each coin are there?")


MATH_GENS = [m_shop, m_speed, m_percent, m_ratio, m_area, m_age, m_work, m_mixture, m_prob,
             m_seq, m_unit, m_interest, m_schedule, m_temp, m_geometry, m_discount, m_fuel,
             m_average, m_combin, m_coins]

PROOFS = [
    "Prove that the sum of two even integers is even.",
    "Prove that the product of any two consecutive integers is even.",
    "Prove that if a number is divisible by 6, then it is divisible by 3.",
    "Prove that the difference of the squares of two consecutive integers is odd.",
    "Prove that there are infinitely many prime numbers.",
    "Prove that for every positive integer n, 1 + 2 + ... + n = n(n+1)/2.",
    "Prove that the sum of the interior angles of a triangle is 180 degrees, using parallel lines.",
    "Prove that n^3 - n is divisible by 6 for every integer n.",
    "Prove that the square root of 3 is irrational.",
    "Prove that if x is a real number with x > 0, then x + 1/x is at least 2.",
    "Prove that every integer greater than 1 has at least one prime factor.",
    "Prove that a number is divisible by 9 if and only if the sum of its digits is divisible by 9.",
    "Prove that 2^n > n for every positive integer n.",
    "Prove that the diagonals of a parallelogram bisect each other.",
    "Prove that among any five integers, some two have the same remainder when divided by 4.",
    "Prove that the sum of any five consecutive integers is divisible by 5.",
    "Prove that if n^2 is odd then n is odd.",
    "Prove that there is no smallest positive rational number.",
]


def gen_math(rng):
    out = []
    for _ in range(26):
        for g in MATH_GENS:
            out.append(g(rng) + " " + pick(rng, MATH_SUFFIXES))
    for p in PROOFS:
        out.append(p + " Present the proof in clear, numbered steps.")
        out.append(p + " Explain the key idea first, then give a rigorous argument.")
    return out


# ---------------------------------------------------------------------------
# Summarization of short, generated passages
# ---------------------------------------------------------------------------

PROJECTS = [
    ("a new footbridge over the river", "link the station with the market square"),
    ("the renovation of the public swimming baths", "reopen the pool to schools within two years"),
    ("a solar canopy over the main car park", "cut the council's electricity bill"),
    ("a widening of the northern ring road", "reduce queues at rush hour"),
    ("the conversion of an old warehouse into a youth center", "give teenagers a safe place to meet"),
    ("a flood wall along the harbor front", "protect low-lying streets from storm surges"),
    ("the replacement of all streetlights with LEDs", "save energy and improve visibility"),
    ("a new primary school on the former dairy site", "ease overcrowding in existing classrooms"),
]
CONCERNS = ["noise during construction", "the loss of mature trees", "rising council tax",
            "traffic diversions", "the impact on local wildlife", "parking during the works"]
MITIGATIONS = ["work will be limited to weekday daytime hours",
               "replacement trees will be planted nearby",
               "a shuttle bus will run while roads are closed",
               "an ecologist will monitor the site",
               "residents will receive regular email updates"]
TITLES = ["Council leader", "Project manager", "Deputy mayor", "Chief engineer", "Planning officer"]


def p_project(rng):
    town, (proj, goal) = pick(rng, TOWNS), pick(rng, PROJECTS)
    cost, dur = rng.randint(2, 45), rng.randint(6, 30)
    return (f"{town} officials announced on {pick(rng, WEEKDAYS)} that work will begin in "
            f"{pick(rng, MONTHS)} on {proj}. The scheme is expected to cost about {cost} million "
            f"and take roughly {dur} months to complete. {pick(rng, TITLES)} {person(rng)} said the "
            f"main purpose was to {goal}, adding that funding had been secured from a mix of local "
            f"reserves and a national grant. Not everyone is pleased: some residents have raised "
            f"concerns about {pick(rng, CONCERNS)}. In response, the council said {pick(rng, MITIGATIONS)}. "
            f"A public drop-in session about the plans will take place at the {town} community "
            f"hall later this month.")


FINDINGS = [
    ("adults who walked at least 7,000 steps a day", "reported better sleep quality"),
    ("children who ate breakfast before school", "scored higher on short attention tests"),
    ("office workers who took a short break every hour", "made fewer typing errors"),
    ("older adults who learned a new musical instrument", "showed improved short-term memory"),
    ("gardeners who grew their own vegetables", "ate noticeably more fiber"),
    ("students who explained lessons to a classmate", "remembered more a week later"),
    ("commuters who cycled to work", "took fewer sick days"),
    ("patients who listened to calm music before surgery", "needed less sedative medication"),
]
INSTITUTES = ["the University of " + t for t in ["Kelvedon", "Northcombe", "Larkspur", "Dunmere"]] + [
    "a public health institute", "an independent research charity"]
CAVEATS = ["the study shows an association rather than proof of cause",
           "participants were mostly from a single region",
           "the results relied on self-reported data",
           "the effect was modest and may not apply to everyone"]


def p_research(rng):
    (who, what), inst = pick(rng, FINDINGS), pick(rng, INSTITUTES)
    n, dur = rng.randint(120, 4800), pick(rng, ["six months", "one year", "eighteen months", "three years"])
    pct = rng.randint(8, 35)
    return (f"Researchers at {inst} have reported that {who} {what}. The team followed {n:,} "
            f"volunteers over {dur}, collecting questionnaires and, for some participants, data from "
            f"wearable devices. On average, the difference between groups was about {pct} percent. "
            f"Lead author Dr. {person(rng)} said the findings were encouraging but cautioned that "
            f"{pick(rng, CAVEATS)}. The team now plans a larger trial and hopes to publish further "
            f"results next year. Other experts welcomed the work but called for independent replication.")


COMPANIES = [("Brightloom", "smart kitchen scales"), ("Corvid Audio", "wireless headphones"),
             ("Tallow & Pine", "scented candles"), ("Nimbus Outdoor", "lightweight tents"),
             ("Quarrystone", "garden furniture"), ("Veloworks", "electric cargo bikes"),
             ("Inkwell Labs", "note-taking tablets"), ("Harvest Crate", "meal kits")]
REASONS_UP = ["strong online sales", "a popular new product line", "expansion into two new countries",
              "lower shipping costs"]
REASONS_DOWN = ["weaker demand after the holiday season", "higher raw material costs",
                "a product recall", "delays at a key supplier"]


def p_business(rng):
    (co, prod) = pick(rng, COMPANIES)
    up = rng.random() < 0.5
    rev = rng.randint(12, 480)
    chg = rng.randint(3, 28)
    reason = pick(rng, REASONS_UP if up else REASONS_DOWN)
    return (f"{co}, which makes {prod}, said revenue for the latest quarter was {rev} million, "
            f"{'up' if up else 'down'} {chg} percent from a year earlier. The company attributed the "
            f"change mainly to {reason}. Chief executive {person(rng)} told investors that the company "
            f"would {'continue hiring and open a second warehouse' if up else 'cut marketing spending and pause hiring'} "
            f"over the coming months. {'Shares rose' if up else 'Shares fell'} about {rng.randint(2, 12)} "
            f"percent in early trading. Analysts said the next quarter would show whether the trend "
            f"was likely to last, noting that competition in the sector remains intense.")


SPORTS = [("basketball", "points", (60, 110)), ("handball", "goals", (18, 38)),
          ("rugby", "points", (6, 40)), ("ice hockey", "goals", (0, 7)), ("volleyball", "sets", None)]


def p_sport(rng):
    sport, unit, rnge = pick(rng, SPORTS)
    t1, t2 = rng.sample(TOWNS, 2)
    if rnge is None:
        s1, s2 = 3, rng.randint(0, 2)
    else:
        s2 = rng.randint(rnge[0], rnge[1] - 1)
        s1 = rng.randint(s2 + 1, rnge[1])
    star = person(rng)
    return (f"{t1} beat {t2} {s1}-{s2} in {sport} on {pick(rng, WEEKDAYS)} evening in front of a "
            f"crowd of about {rng.randint(8, 90) * 100} supporters. The visitors started well and "
            f"led for much of the first half, but {t1} improved after the break. {star} was the "
            f"standout player, contributing several key {unit} late in the game. The coach praised "
            f"the team's patience and said the squad had worked hard on its defense in training. "
            f"The result moves {t1} up to {pick(rng, ['second', 'third', 'fourth', 'fifth'])} in the "
            f"league table, with {rng.randint(3, 12)} matches left in the season.")


HAZARDS = [("heavy snow", "up to 20 centimeters could fall on higher ground"),
           ("strong winds", "gusts may reach 90 kilometers per hour near the coast"),
           ("a heatwave", "temperatures are expected to exceed 33 degrees for three days"),
           ("dense fog", "visibility may fall below 100 meters on rural roads"),
           ("thunderstorms", "some areas could see a month's rain in a few hours")]
HAZARD_ADVICE = ["allow extra time for journeys", "check on elderly neighbors",
                 "secure loose garden furniture", "avoid unnecessary travel",
                 "keep curtains closed during the hottest part of the day"]


def p_weather(rng):
    (h, detail), town = pick(rng, HAZARDS), pick(rng, TOWNS)
    a1, a2 = rng.sample(HAZARD_ADVICE, 2)
    return (f"Forecasters have issued a warning for {h} across the region around {town}, valid "
            f"from {pick(rng, WEEKDAYS)} morning until late the following day. They say {detail}. "
            f"Residents are advised to {a1} and to {a2}. Some bus routes may be changed at short notice, "
            f"and schools will announce any closures on their websites by 7 am. The local council "
            f"has placed extra staff on standby and will open a helpline for people who need "
            f"urgent assistance during the warning period.")


STORY_HEROES = ["a retired postman", "a shy apprentice carpenter", "a teenage beekeeper",
                "a night-shift nurse", "an elderly ferry captain", "a young violin teacher",
                "a market gardener", "a museum security guard"]
STORY_PROBLEMS = [("found a wallet stuffed with old letters on the tram",
                   "tracked down the owner's grandson through a name on an envelope"),
                  ("lost the keys to the workshop on the morning of a big delivery",
                   "borrowed a ladder and climbed in through a skylight"),
                  ("noticed smoke rising from a neighbor's chimney in the middle of summer",
                   "discovered an abandoned bird's nest had caught fire and put it out"),
                  ("was asked to replace a musician who fell ill an hour before a concert",
                   "practiced the piece in a stairwell and played without a mistake"),
                  ("heard a faint mewing from a storm drain during a rainstorm",
                   "called the fire brigade, who rescued three kittens"),
                  ("received a parcel addressed to someone who had died years earlier",
                   "delivered it to the local archive, where it solved an old mystery")]


def p_story(rng):
    hero, (prob, res) = pick(rng, STORY_HEROES), pick(rng, STORY_PROBLEMS)
    name = pick(rng, FIRST_NAMES)
    town = pick(rng, TOWNS)
    return (f"{name}, {hero} from {town}, had expected an ordinary {pick(rng, WEEKDAYS)}. Then "
            f"{name} {prob}. At first there seemed to be no obvious way forward, and a few people "
            f"suggested simply giving up. Instead, {name} {res}. By evening the story had spread "
            f"around town, and several neighbors stopped by to say thank you. Looking back, {name} "
            f"said the day had been a reminder that small choices can matter more than we expect.")


PASSAGE_GENS = [p_project, p_research, p_business, p_sport, p_weather, p_story]
SUMM_INSTRUCTIONS = [
    "Summarize the passage in one sentence.",
    "Give a two-sentence summary of the text.",
    "List the three most important facts from the text as bullet points.",
    "Write a headline and a one-sentence summary for this text.",
    "Summarize this for a busy reader in under 30 words.",
    "What is the main point of this passage? Answer in a single short paragraph.",
    "Condense the text into a tweet-length summary.",
    "Summarize the passage, keeping all numbers that appear in it.",
    "Write a brief summary suitable for a morning news digest.",
    "Summarize the text in plain language for a child.",
]
SUMM_WRAPPERS = [
    "{ins}\n\n{p}",
    "{p}\n\n{ins}",
    "Read the following text.\n\n{p}\n\n{ins}",
    "Text:\n{p}\n\nTask: {ins}",
]


def gen_summ(rng):
    out = []
    for _ in range(90):
        for g in PASSAGE_GENS:
            p = g(rng)
            out.append(pick(rng, SUMM_WRAPPERS).format(p=p, ins=pick(rng, SUMM_INSTRUCTIONS)))
    return out


# ---------------------------------------------------------------------------
# Translation
# ---------------------------------------------------------------------------

EN_SUBJECTS = ["My sister", "The new manager", "Our neighbors", "The children", "The tour guide",
               "My colleague from Lisbon", "The old fisherman", "Her best friend", "The bakery owner",
               "Our football coach", "The librarian", "My uncle", "The delivery driver",
               "The students in my class", "The hotel receptionist", "Everyone at the party"]
EN_PAST = ["forgot to bring the tickets", "painted the fence green", "found a wallet on the bus",
           "missed the last train home", "cooked a huge pot of vegetable soup",
           "lost the map halfway up the hill", "planted three apple trees behind the house",
           "laughed for ten minutes at the same joke", "repaired the old radio with a paperclip",
           "waited two hours in the rain for a taxi", "learned to make pasta from scratch",
           "sang loudly all the way to the beach", "wrote a long letter to the mayor"]
EN_PAST_TIMES = ["yesterday", "last weekend", "on Tuesday evening", "two years ago",
                 "during the storm", "after lunch"]
EN_FUTURE = ["will open a small bookshop near the harbor", "will run a marathon for charity",
             "will move to a flat with a balcony", "will start a course in pottery",
             "will visit their grandparents by the sea", "will bring dessert to the picnic",
             "will give a short speech at the ceremony", "will repaint the kitchen a pale blue",
             "will take the night train to the mountains", "will teach the dog a new trick"]
EN_FUTURE_TIMES = ["next spring", "in September", "tomorrow morning", "after the holidays",
                   "next weekend", "before the end of the year"]
TARGET_LANGS = ["French", "German", "Spanish"]
EN_TEMPLATES = [
    "Translate into {lang}: {s}",
    "How would you say \"{s}\" in {lang}?",
    "Translate the following sentence into {lang}, using a formal register:\n\n{s}",
    "Give a natural, informal {lang} translation of this sentence:\n\n{s}",
    "Translate to {lang} and then back-translate your version into English to check it:\n\n{s}",
]

FOREIGN = {
    "French": [
        "Nous avons raté le dernier bus et nous sommes rentrés à pied.",
        "Peux-tu m'aider à porter ces cartons jusqu'au troisième étage ?",
        "Le boulanger du quartier ouvre à six heures du matin, même le dimanche.",
        "J'ai oublié de répondre à ton message, excuse-moi.",
        "Les billets pour le concert se sont vendus en moins d'une heure.",
        "Mon voisin cultive des tomates sur son balcon depuis des années.",
        "Il faudra réserver une table si nous voulons dîner en terrasse.",
        "La réunion de demain est avancée à neuf heures.",
        "Ce roman m'a tellement plu que je l'ai lu en deux jours.",
        "Nous cherchons quelqu'un pour garder notre chat pendant les vacances.",
        "L'entrée du musée est gratuite le premier dimanche de chaque mois.",
        "Elle a appris à nager à l'âge de quarante ans.",
        "Il y a toujours trop de circulation en ville le vendredi soir.",
        "Pourriez-vous m'indiquer le chemin de la gare, s'il vous plaît ?",
        "Les enfants ont construit une cabane au fond du jardin.",
        "Le matin, je préfère le thé au café.",
        "Le médecin m'a conseillé de marcher trente minutes par jour.",
        "Notre vol a été annulé à cause du brouillard.",
        "Ils ont repeint la cuisine en jaune pendant le week-end.",
        "Cette année, la récolte de pommes a été exceptionnelle.",
        "Je n'ai jamais vu autant d'étoiles que cette nuit-là.",
        "Mes parents se sont rencontrés dans un train entre Lyon et Marseille.",
        "Il vaut mieux partir tôt pour éviter les embouteillages.",
        "Le chien du voisin aboie chaque fois que le facteur passe.",
    ],
    "German": [
        "Wir haben den letzten Bus verpasst und sind zu Fuß nach Hause gegangen.",
        "Kannst du mir helfen, die Kisten in den dritten Stock zu tragen?",
        "Die Bäckerei an der Ecke öffnet schon um sechs Uhr morgens.",
        "Ich habe vergessen, dir zurückzuschreiben. Entschuldige bitte!",
        "Die Karten für das Konzert waren in weniger als einer Stunde ausverkauft.",
        "Mein Nachbar baut seit Jahren Tomaten auf seinem Balkon an.",
        "Am Wochenende regnet es wahrscheinlich, also bleiben wir lieber zu Hause.",
        "Die Besprechung morgen wurde auf neun Uhr vorverlegt.",
        "Das Buch hat mir so gut gefallen, dass ich es in zwei Tagen gelesen habe.",
        "Wir suchen jemanden, der in den Ferien auf unsere Katze aufpasst.",
        "Der Eintritt ins Museum ist am ersten Sonntag im Monat frei.",
        "Sie hat erst mit vierzig Jahren schwimmen gelernt.",
        "Freitagabends ist in der Innenstadt immer viel zu viel Verkehr.",
        "Könnten Sie mir bitte sagen, wie ich zum Bahnhof komme?",
        "Die Kinder haben hinten im Garten ein Baumhaus gebaut.",
        "Morgens trinke ich lieber Tee als Kaffee.",
        "Der Arzt hat mir geraten, jeden Tag eine halbe Stunde spazieren zu gehen.",
        "Unser Flug wurde wegen Nebel gestrichen.",
        "Am Wochenende haben sie die Küche gelb gestrichen.",
        "Dieses Jahr war die Apfelernte außergewöhnlich gut.",
        "So viele Sterne wie in jener Nacht habe ich noch nie gesehen.",
        "Meine Eltern haben sich in einem Zug zwischen Hamburg und München kennengelernt.",
        "Wir sollten früh losfahren, um den Stau zu vermeiden.",
        "Der Hund der Nachbarn bellt jedes Mal, wenn der Briefträger kommt.",
    ],
    "Spanish": [
        "Perdimos el último autobús y volvimos a casa andando.",
        "¿Me ayudas a subir estas cajas al tercer piso?",
        "La panadería de la esquina abre a las seis de la mañana, incluso los domingos.",
        "Se me olvidó contestar a tu mensaje, perdona.",
        "Las entradas para el concierto se agotaron en menos de una hora.",
        "Mi vecino lleva años cultivando tomates en su balcón.",
        "Si queremos cenar en la terraza, tendremos que reservar mesa.",
        "La reunión de mañana se ha adelantado a las nueve.",
        "Me gustó tanto la novela que la leí en dos días.",
        "Buscamos a alguien que cuide a nuestro gato durante las vacaciones.",
        "La entrada al museo es gratuita el primer domingo de cada mes.",
        "Aprendió a nadar a los cuarenta años.",
        "Los viernes por la tarde hay demasiado tráfico en el centro.",
        "¿Podría decirme cómo llegar a la estación, por favor?",
        "Los niños construyeron una cabaña al fondo del jardín.",
        "Por las mañanas prefiero el té al café.",
        "El médico me recomendó caminar media hora al día.",
        "Cancelaron nuestro vuelo por la niebla.",
        "Pintaron la cocina de amarillo durante el fin de semana.",
        "Este año la cosecha de manzanas ha sido excepcional.",
        "Nunca he visto tantas estrellas como aquella noche.",
        "Mis padres se conocieron en un tren entre Madrid y Sevilla.",
        "Es mejor salir temprano para evitar los atascos.",
        "El perro de los vecinos ladra cada vez que pasa el cartero.",
    ],
}
FOREIGN_TEMPLATES = [
    "Translate into English: {s}",
    "What does this {src} sentence mean in English?\n\n{s}",
    "Translate from {src} into {tgt}:\n\n{s}",
    "Translate this {src} sentence into English and point out one grammatical feature that differs from English:\n\n{s}",
]


def gen_trans(rng):
    out = []
    en = []
    for s in EN_SUBJECTS:
        for p in EN_PAST:
            en.append(f"{s} {p} {pick(rng, EN_PAST_TIMES)}.")
        for p in EN_FUTURE:
            en.append(f"{s} {p} {pick(rng, EN_FUTURE_TIMES)}.")
    rng.shuffle(en)
    for s in en[:240]:
        out.append(pick(rng, EN_TEMPLATES).format(lang=pick(rng, TARGET_LANGS), s=s))
    for src, sents in FOREIGN.items():
        others = [l for l in TARGET_LANGS if l != src]
        for s in sents:
            for tpl in FOREIGN_TEMPLATES:
                out.append(tpl.format(s=s, src=src, tgt=pick(rng, others)))
    return out


# ---------------------------------------------------------------------------
# QA over short generated documents
# ---------------------------------------------------------------------------

GADGETS = ["portable speaker", "fitness tracker", "e-reader", "desk lamp", "electric toothbrush",
           "travel kettle", "label printer", "baby monitor", "wireless keyboard", "dash camera"]
BRANDS = ["Solace", "Kinetra", "Vireo", "Ampletide", "Northwind", "Halcyon", "Zephra", "Lumen & Co"]
COLORS = ["charcoal", "sage green", "white", "navy", "coral", "sand", "slate blue"]


def q_spec(rng):
    brand, g = pick(rng, BRANDS), pick(rng, GADGETS)
    model = f"{brand} {g.title().replace(' ', '')} {rng.randint(2, 9)}"
    w, batt, chg = rng.randint(80, 900), rng.randint(6, 60), rng.randint(1, 5)
    cols = rng.sample(COLORS, 3)
    war, price = rng.randint(1, 3), rng.randint(19, 249)
    doc = (f"The {model} is a {g} weighing {w} grams. Its built-in battery lasts up to {batt} hours "
           f"and recharges fully in about {chg} hours over USB-C. It is sold in {cols[0]}, {cols[1]} "
           f"and {cols[2]}. The recommended retail price is {price}, and it comes with a {war}-year "
           f"warranty that covers manufacturing faults but not accidental damage. Replacement parts "
           f"can be ordered from the manufacturer's website.")
    q = pick(rng, [f"How long does it take to fully recharge the {model}?",
                   f"Which colors is the {model} available in?",
                   "Would the warranty cover a device that was dropped in water? Explain.",
                   f"How much does the {model} weigh?"])
    return doc, q


def q_hours(rng):
    shop = pick(rng, ["hardware store", "pharmacy", "bike repair shop", "post office", "bookshop", "dry cleaner"])
    town = pick(rng, TOWNS)
    o1, c1 = rng.randint(7, 10), rng.randint(17, 20)
    o2, c2 = o1 + 1, rng.randint(13, 17)
    closed = pick(rng, WEEKDAYS[:5])
    month = pick(rng, MONTHS)
    doc = (f"The {shop} on the high street in {town} is open from {o1}:00 to {c1}:00 on weekdays, "
           f"except {closed}, when it closes at 13:00 for staff training. On Saturdays it opens at "
           f"{o2}:00 and closes at {c2}:00. It is closed on Sundays. During {month}, the shop will "
           f"also close for one week for refurbishment; exact dates will be posted in the window.")
    q = pick(rng, [f"Can I visit the {shop} at 15:00 on a {closed}?",
                   "What time does the shop close on Saturdays?",
                   "Is the shop ever closed for a whole week? When?",
                   "What are the weekday opening hours?"])
    return doc, q


def q_event(rng):
    ev = pick(rng, ["charity quiz night", "retirement party", "book launch", "summer barbecue",
                    "school reunion", "film screening", "craft fair"])
    host = person(rng)
    day, month = rng.randint(1, 28), pick(rng, MONTHS)
    venue = pick(rng, ["the Old Corn Exchange", "Riverside Rowing Club", "St. Alban's Hall",
                       "the Larch Room at the Grand Hotel", "Willowmead Farm barn"])
    rsvp = max(1, day - rng.randint(3, 10))
    dress = pick(rng, ["smart casual", "fancy dress on a seaside theme", "whatever is comfortable",
                       "black tie optional"])
    doc = (f"You are invited to a {ev} hosted by {host} on {day} {month} at {venue}. Doors open at "
           f"{rng.randint(5, 8)}:30 pm. Dress code: {dress}. Light refreshments will be provided, "
           f"and guests are welcome to bring one companion. Please reply by {rsvp} {month} so that "
           f"the organizers can confirm numbers with the venue.")
    q = pick(rng, ["What is the deadline for replying?", "Where is the event being held?",
                   "Can I bring a friend?", "What should guests wear?"])
    return doc, q


def q_bio(rng):
    name = person(rng)
    born = rng.randint(1880, 1930)
    town = pick(rng, TOWNS)
    job = pick(rng, ["engineer", "botanist", "cartographer", "jazz pianist", "architect", "glassblower"])
    work = pick(rng, ["a bridge that survived two major floods", "a catalogue of local mosses",
                      "the first detailed map of the coastal caves", "an album recorded in a single night",
                      "a library built almost entirely of reclaimed timber",
                      "a set of windows for the cathedral"])
    later = pick(rng, ["taught at a technical college", "ran a small museum", "wrote a memoir",
                       "trained dozens of apprentices"])
    doc = (f"{name} was born in {town} in {born}. After studying in the capital, {name.split()[0]} "
           f"worked as a {job} for more than thirty years and is best remembered for {work}, "
           f"completed in {born + rng.randint(28, 45)}. In later life, {name.split()[0]} {later}. "
           f"A plaque marking the family home was unveiled in {town} in {born + rng.randint(80, 95)}.")
    q = pick(rng, [f"How old was {name.split()[0]} when the best-known work was completed?",
                   f"What profession did {name} follow?",
                   f"Where was {name} born?",
                   f"What did {name.split()[0]} do later in life?"])
    return doc, q


def q_recipe(rng):
    dish = pick(rng, ["lentil soup", "oat biscuits", "roast vegetable tray bake", "banana loaf",
                      "spinach frittata", "apple crumble", "chickpea curry"])
    serves, temp, mins = rng.randint(2, 8), pick(rng, [160, 170, 180, 190, 200, 220]), rng.randint(15, 70)
    prep = rng.randint(10, 30)
    doc = (f"Recipe card: {dish}. Serves {serves}. Preparation time {prep} minutes; cooking time "
           f"{mins} minutes. Preheat the oven to {temp}°C if baking, or use a large pan on medium heat. "
           f"The dish keeps for three days in the fridge and can be frozen for up to a month. For a "
           f"vegan version, replace butter with olive oil and skip any eggs.")
    q = pick(rng, ["What is the total time needed, including preparation?",
                   "How many people does the recipe serve?",
                   "How long can leftovers be kept in the fridge?",
                   "How can the recipe be made vegan?"])
    return doc, q


def q_timetable(rng):
    route = rng.randint(3, 99)
    a, b = rng.sample(TOWNS, 2)
    first = rng.randint(5, 7)
    freq = pick(rng, [10, 12, 15, 20, 30])
    last = rng.randint(21, 23)
    trip = rng.randint(18, 55)
    doc = (f"Bus route {route} runs between {a} and {b}. On weekdays the first bus leaves {a} at "
           f"{first}:05 and buses then run every {freq} minutes until {last}:05. The journey takes "
           f"about {trip} minutes. On Sundays the service runs every hour from 8:05. Day tickets are "
           f"valid on all routes and can be bought from the driver or in the app.")
    q = pick(rng, [f"If I catch the first weekday bus from {a}, when will I arrive in {b}?",
                   "How often do buses run on Sundays?",
                   "Where can I buy a day ticket?",
                   f"When does the last weekday bus leave {a}?"])
    return doc, q


QA_GENS = [q_spec, q_hours, q_event, q_bio, q_recipe, q_timetable]
QA_WRAPPERS = [
    "Read the text and answer the question.\n\n{d}\n\nQuestion: {q}",
    "{d}\n\nBased only on the text above: {q}",
    "Context:\n{d}\n\n{q} Quote the relevant sentence in your answer.",
    "Here is some information:\n\n{d}\n\nAnswer briefly: {q}",
]


def gen_qa(rng):
    out = []
    for _ in range(80):
        for g in QA_GENS:
            d, q = g(rng)
            out.append(pick(rng, QA_WRAPPERS).format(d=d, q=q))
    return out


# ---------------------------------------------------------------------------
# Assemble
# ---------------------------------------------------------------------------

def build_records() -> list[dict]:
    """The built-in training prompts, in file order (deterministic: seeded)."""
    rng = random.Random(SEED)
    generators = {
        "chat": gen_chat, "code": gen_code, "math": gen_math,
        "summarization": gen_summ, "translation": gen_trans, "qa": gen_qa,
    }
    seen = set()
    selected = []
    for cat, gen in generators.items():
        pool = []
        for text in gen(rng):
            key = norm(text)
            if key in seen:
                continue
            seen.add(key)
            pool.append(text)
        need = TARGETS[cat]
        if len(pool) < need:
            raise SystemExit(f"category {cat}: only {len(pool)} unique prompts, need {need}")
        rng.shuffle(pool)
        selected.extend((cat, t) for t in pool[:need])
    rng.shuffle(selected)
    return [{"id": f"train-{i:05d}", "category": cat, "messages": [{"role": "user", "content": text}]}
            for i, (cat, text) in enumerate(selected, 1)]


def render(records: list[dict]) -> str:
    return "".join(json.dumps(rec, ensure_ascii=False) + "\n" for rec in records)


def main(out_path: str = OUT_PATH):
    records = build_records()
    with open(out_path, "w", encoding="utf-8") as f:
        f.write(render(records))
    print(f"wrote {len(records)} prompts to {out_path}")


if __name__ == "__main__":
    main()
