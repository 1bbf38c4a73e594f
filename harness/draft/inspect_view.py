"""Human-readable rendering of a DraftInfo and its fit (the `draft inspect` table)."""

from __future__ import annotations

from harness.draft.formats import DraftInfo

FORMAT_NAMES = {
    "speculators": "speculators",
    "specforge": "SpecForge / EAGLE-3",
    "mla-eagle3": "MLA EAGLE-3",
    "p-eagle": "P-EAGLE",
    "mtp": "the verifier's own MTP layers",
}


def _verifier_line(info: DraftInfo) -> str:
    v = info.verifier
    if not v:
        return "not recorded"
    parts = [str(v.get("name_or_path") or v.get("target_model") or "?")]
    if v.get("architectures"):
        parts.append(", ".join(v["architectures"]))
    ch = v.get("content_hash")
    if isinstance(ch, dict) and ch.get("sha256"):
        parts.append(f"content {ch['sha256']}")
    return " · ".join(parts)


def render_draft(
    info: DraftInfo,
    console,
    verifier: str | None = None,
    problems: list[str] | None = None,
    aux_in_use: tuple[int, ...] | None = None,
) -> None:
    from rich.table import Table

    t = Table(title=f"draft {info.path}", show_header=False, title_justify="left")
    t.add_column(style="bold")
    t.add_column()
    method = info.vllm_method + (" + parallel_drafting" if info.parallel_drafting else "")
    t.add_row("format", f"{FORMAT_NAMES.get(info.format, info.format)}  (vLLM method {method})")
    t.add_row("architecture", info.architecture)
    t.add_row(
        "layers / hidden",
        f"{info.num_layers} / {info.hidden_size}"
        + (f" (reads verifier width {info.target_hidden_size})" if info.target_hidden_size != info.hidden_size else ""),
    )
    if info.format != "mtp":
        ids = (
            ", ".join(map(str, info.aux_layer_ids))
            if info.aux_layer_ids
            else "not recorded (vLLM default 2, L//2, L-3)"
        )
        t.add_row(
            "aux layer ids",
            ids + (f"  -> {aux_in_use} on this verifier" if aux_in_use and not info.aux_layer_ids else ""),
        )
        t.add_row("fc", f"{list(info.fc_shape)} [out, in]" if info.fc_shape else "none")
        t.add_row("vocab draft / target", f"{info.draft_vocab_size} / {info.target_vocab_size}")
        maps = ", ".join(n for n, has in (("d2t", info.has_d2t), ("t2d", info.has_t2d)) if has) or "none (full vocab)"
        if info.d2t_target_range:
            maps += f"; d2t targets ids {info.d2t_target_range[0]}..{info.d2t_target_range[1]}"
        t.add_row("vocab maps", maps)
        t.add_row("norm before residual", str(info.norm_before_residual))
    else:
        t.add_row("eh_proj", f"{list(info.fc_shape)} [out, in]" if info.fc_shape else "missing")
    t.add_row("recorded verifier", _verifier_line(info))
    t.add_row("content", f"{info.content_hash['sha256']} ({info.content_hash['method']})")
    if verifier is not None:
        fit = "[green]fits[/]" if not problems else f"[red]does not fit[/] ({len(problems)} problem(s))"
        t.add_row("fits verifier", f"{verifier}: {fit}")
    console.print(t)
    for p in problems or []:
        console.print(f"  [red]x[/] {p}", highlight=False, soft_wrap=True)
