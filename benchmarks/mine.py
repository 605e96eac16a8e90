"""Hard-negative mining: peak memory and seconds of ``sts-mine``'s function against
sentence-transformers' ``mine_hard_negatives`` on the same pairs, candidates and model.

The pairs are the NLI triplets' (premise, entailed hypothesis) rows of ``STS_DATA_DIR``
(11,789); the candidates are their hypotheses and further distinct sentences of the data
folder (the contradicting hypotheses, SNLI and MultiNLI dev/test, the Wikipedia
sentences, WikiQA's candidates, Quora and MRPC) up to ``--corpus-size`` (100,000 in full
mode). Each side runs in a fresh process and reports its peak RSS (its own: ``VmHWM`` on
Linux), its seconds and the triplets it wrote; both use the exact search (``--faiss`` for
faiss on both) with the peer's default settings (3 negatives, sampling top). The triplets
of the two sides are compared (same anchors, positives and negatives).

With ``--stand-in`` no model encodes: each text's vector is a fixed pseudo-random unit
vector (seeded by the text's CRC-32, the model's width), the same on both sides, and the
candidates are filled up to ``--corpus-size`` with made-up texts: the memory of the mining
itself at corpus sizes a CPU cannot encode in a benchmark's time. Each side also reports
its peak anonymous memory (what it holds itself, without the pages of files it maps).

    uv run python benchmarks/mine.py              # 100,000 candidates, all-MiniLM-L6-v2
    uv run python benchmarks/mine.py --quick      # 20,000 candidates
    uv run python benchmarks/mine.py --smoke      # 300 candidates (CI)
    uv run python benchmarks/mine.py --stand-in --pairs 1000 --corpus-size 1000000
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

import _common as common
import numpy as np

MODES = {
    "full": {"corpus_size": 100_000, "pairs": 11_789},
    "quick": {"corpus_size": 20_000, "pairs": 4_000},
    "smoke": {"corpus_size": 300, "pairs": 100},
}
SIDES = ("ours", "peer")


# ----------------------------------------------------------------------------- data
def nli_rows(data: Path) -> list[dict[str, str]]:
    with (data / "nli" / "triplets" / "nli_triplets.csv").open(encoding="utf-8") as file:
        return list(csv.DictReader(file))


def more_sentences(data: Path):
    """Distinct sentences of the data folder beyond the triplets, in a fixed order."""
    for name in ("snli-devtest-raw/snli_1.0_dev.csv", "snli-devtest-raw/snli_1.0_test.csv"):
        yield from _csv_columns(data / "nli" / name, ("sentence1", "sentence2"))
    for path in sorted((data / "nli" / "mnli-dev").glob("*.csv")):
        yield from _csv_columns(path, ("sentence1", "sentence2"))
    for path in sorted((data / "wiki").glob("*.txt")):
        yield from path.read_text(encoding="utf-8").splitlines()
    for path in sorted((data / "pairwise").glob("*/*.txt")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            yield from line.split("\t")


def _csv_columns(path: Path, columns: tuple[str, ...]):
    with path.open(encoding="utf-8") as file:
        for row in csv.DictReader(file):
            yield from (row.get(column) or "" for column in columns)


def build_inputs(
    data: Path, pairs: int, corpus_size: int, made_up: bool = False
) -> dict[str, list[str]]:
    """The pairs (anchors, positives) and the extra candidates: ``corpus_size`` distinct
    texts in all (positives included), fewer if the folder has fewer and not ``made_up``
    (then made-up texts fill it)."""
    rows = nli_rows(data)[:pairs]
    anchors = [row["sent0"].strip() for row in rows]
    positives = [row["sent1"].strip() for row in rows]
    taken = set(positives) | set(anchors)  # an anchor is never a candidate here
    count = len(set(positives))
    extra: list[str] = []
    candidates = [row["hard_neg"] for row in nli_rows(data)]
    for text in (*candidates, *more_sentences(data)):
        if count >= corpus_size:
            break
        text = text.strip()
        if len(text) > 3 and text not in taken and not text.isdigit():
            taken.add(text)
            extra.append(text)
            count += 1
    if made_up:
        extra += [f"made-up candidate number {i}" for i in range(corpus_size - count)]
    return {"anchors": anchors, "positives": positives, "corpus": extra}


class StandIn:
    """A model whose ``encode`` (and the peer's ``encode_document``, ``encode_query``)
    returns each text's fixed pseudo-random unit vector of ``width`` (seeded by its
    CRC-32); anything else (the peer's ``similarity``, ``device`` …) is ``model``'s."""

    def __init__(self, width: int, model: Any = None) -> None:
        self.width, self.model = width, model

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)

    def encode(
        self, texts: list[str], batch_size: int = 32, normalize_embeddings: bool = False,
        **unused: Any,
    ) -> np.ndarray:  # fmt: skip
        vectors = np.empty((len(texts), self.width), dtype=np.float32)
        for row, text in enumerate(texts):
            rng = np.random.default_rng(zlib.crc32(text.encode("utf-8")))
            vectors[row] = rng.standard_normal(self.width, dtype=np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    encode_document = encode_query = encode


# ----------------------------------------------------------------------------- workers
def worker(side: str, spec: dict[str, Any]) -> dict[str, Any]:
    anonymous = common.AnonymousPeak()
    common.set_threads(spec["threads"])
    inputs = json.loads(Path(spec["inputs"]).read_text(encoding="utf-8"))
    from datasets import Dataset

    start = time.perf_counter()
    if side == "ours":
        from sts_core.encoder import SentenceEncoder
        from sts_core.mining import MiningSettings, SearchSettings, mine

        encoder = SentenceEncoder.from_pretrained(spec["model"]).eval()
        if spec["stand_in"]:
            encoder = StandIn(encoder.dimension)
        pairs = Dataset.from_dict(
            {"sentence1": inputs["anchors"], "sentence2": inputs["positives"]}
        )
        loaded = time.perf_counter()
        mined, report = mine(
            pairs,
            encoder,
            MiningSettings(num_negatives=3),
            corpus=inputs["corpus"],
            search_settings=SearchSettings(batch_size=spec["batch_size"], use_faiss=spec["faiss"]),
            output_scores=True,
        )
        corpus_size = report.corpus
        negative_scores = [pair[1] for pair in mined["scores"]]
    else:
        from sentence_transformers import SentenceTransformer
        from sentence_transformers.util import mine_hard_negatives as peer_mine

        model = SentenceTransformer(spec["model"], device="cpu")
        if spec["stand_in"]:
            model = StandIn(model.get_embedding_dimension(), model)
        table = Dataset.from_dict({"anchor": inputs["anchors"], "positive": inputs["positives"]})
        loaded = time.perf_counter()
        mined = peer_mine(
            table,
            model,
            corpus=inputs["corpus"],
            num_negatives=3,
            batch_size=spec["batch_size"],
            use_faiss=spec["faiss"],
            verbose=False,
            output_scores=True,
        )
        corpus_size = len(dict.fromkeys(inputs["corpus"] + inputs["positives"]))
        negative_scores = [pair[1] for pair in mined["scores"]]
    seconds = time.perf_counter() - loaded
    triplets = list(zip(mined["anchor"], mined["positive"], mined["negative"], strict=True))
    digest = hashlib.sha256(json.dumps(triplets).encode("utf-8")).hexdigest()
    rows = [[*triplet, score] for triplet, score in zip(triplets, negative_scores, strict=True)]
    Path(f"{spec['inputs']}.{side}.json").write_text(json.dumps(rows), encoding="utf-8")
    return {
        "seconds": round(seconds, 2),
        "load_seconds": round(loaded - start, 2),
        "triplets": len(triplets),
        "triplets_sha256": digest,
        "corpus": corpus_size,
        "peak_rss_mb": round(common.peak_rss_mb(), 1),
        "peak_anon_mb": anonymous.now(),
    }


def compare_triplets(ours: list[list], peer: list[list], tolerance: float = 1e-5) -> dict:
    """How the two lists of (anchor, positive, negative, negative cosine) differ: the rows
    whose triplet differs, and of those the ones whose negatives score the same on both
    sides (within ``tolerance``): a tie broken the other way."""
    if len(ours) != len(peer):
        return {"rows_differ": None, "ties": None, "lengths": [len(ours), len(peer)]}
    differ = [(a, b) for a, b in zip(ours, peer, strict=True) if a[:3] != b[:3]]
    ties = sum(abs(a[3] - b[3]) <= tolerance for a, b in differ)
    return {"rows_differ": len(differ), "ties": ties, "lengths": [len(ours), len(peer)]}


# ----------------------------------------------------------------------------- report
def report_markdown(results: dict[str, dict], spec: dict[str, Any], info: dict) -> str:
    ours, peer = results["ours"], results["peer"]
    same = ours["triplets_sha256"] == peer["triplets_sha256"]
    diff = spec.get("difference") or {}
    rows = [
        ("peak RSS, MiB", ours["peak_rss_mb"], peer["peak_rss_mb"]),
        ("peak anonymous memory, MiB", ours.get("peak_anon_mb"), peer.get("peak_anon_mb")),
        ("seconds (embedding, search, selection)", ours["seconds"], peer["seconds"]),
        ("triplets written", ours["triplets"], peer["triplets"]),
    ]
    search = "faiss IndexFlatIP" if spec["faiss"] else "exact"
    encoder = spec["model_name"]
    if spec.get("stand_in"):
        encoder = (
            f"no model: each text a fixed pseudo-random unit vector of {spec['model_name']}'s "
            "width, the same on both sides (`--stand-in`; the candidates filled with made-up "
            "texts)"
        )
    return "\n".join(
        [
            "# Hard-negative mining: `sts_core.mining` vs `sentence_transformers.util."
            "mine_hard_negatives`",
            "",
            f"Mode `{spec['mode']}`: {spec['pairs']:,} NLI (premise, entailed hypothesis) "
            f"pairs, {ours['corpus']:,} distinct candidates (the positives included), "
            f"{encoder}, batch {spec['batch_size']}, {spec['threads']} thread(s), "
            f"CPU, {search} search, 3 negatives (top); each side a fresh process.",
            "",
            common.machine_markdown(info),
            "",
            common.markdown_table(
                ["", "ours", "sentence-transformers"],
                [(label, common.fmt_or_na(a, 1), common.fmt_or_na(b, 1)) for label, a, b in rows],
            ),
            "",
            f"The same triplets on both sides: **{'yes' if same else 'no'}** (SHA-256 of the "
            "(anchor, positive, negative) list)"
            + (
                f"; {diff['rows_differ']:,} of {ours['triplets']:,} rows differ, {diff['ties']:,} "
                "of them with negatives of equal cosine on both sides (to 1e-5: ties broken "
                "the other way)."
                if not same and diff.get("rows_differ") is not None
                else "."
            ),
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = common.benchmark_parser(
        __doc__, quick="20,000 candidates", smoke="300 candidates (CI)"
    )
    common.add_model_argument(parser)
    parser.add_argument("--corpus-size", type=common.COUNT, default=None)
    parser.add_argument("--pairs", type=common.COUNT, default=None)
    parser.add_argument("--batch-size", type=common.COUNT, default=64)
    parser.add_argument("--faiss", action="store_true", help="faiss search on both sides")
    parser.add_argument(
        "--stand-in",
        action="store_true",
        help="no model encodes: fixed pseudo-random vectors per text, made-up candidates",
    )
    common.add_side_arguments(parser, SIDES)
    args = parser.parse_args(argv)
    if args.worker:
        common.emit_result(worker(args.worker, json.loads(args.spec)))
        return 0
    args = common.apply_mode(args, MODES)
    name = "mine_stand_in" if args.stand_in else "mine"
    files, stem = common.result_files("mine.py", name, args, models=[args.model])
    files.check()
    inputs = build_inputs(common.data_dir(), args.pairs, args.corpus_size, args.stand_in)
    info = common.machine_info()
    with tempfile.TemporaryDirectory(prefix="sts-bench-mine-") as scratch:
        inputs_path = Path(scratch) / "inputs.json"  # the sides' inputs and triplets
        inputs_path.write_text(json.dumps(inputs), encoding="utf-8")
        spec, results = run_sides(args, inputs, inputs_path)
    common.write_json(stem, {"spec": spec, "machine": info, "results": results})
    path = common.write_markdown(stem, report_markdown(results, spec, info))
    print(f"wrote {path}")
    return 0


def run_sides(
    args: argparse.Namespace, inputs: dict[str, Any], inputs_path: Path
) -> tuple[dict[str, Any], dict[str, dict]]:
    """Each side in a fresh process on ``inputs`` (saved at ``inputs_path``, in a scratch
    folder where the sides write their triplets); the spec, with how the triplets differ,
    and each side's result."""
    spec = {
        "mode": args.mode,
        "model": str(common.model_path(args.model)),
        "model_name": args.model,
        "pairs": len(inputs["anchors"]),
        "batch_size": args.batch_size,
        "threads": args.threads or common.default_threads(),
        "faiss": args.faiss,
        "stand_in": args.stand_in,
        "inputs": str(inputs_path),
    }
    results = {}
    for side in SIDES:
        print(f"  {side} …", flush=True)
        results[side] = common.run_worker(__file__, side, spec)
        print(f"    {common.summary_line(results[side])}", flush=True)
    rows = [Path(f"{inputs_path}.{side}.json") for side in SIDES]
    spec["difference"] = compare_triplets(
        *(json.loads(path.read_text(encoding="utf-8")) for path in rows)
    )
    return spec, results


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    common.main_guard(main)
