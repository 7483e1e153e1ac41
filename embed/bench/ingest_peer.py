#!/usr/bin/env python3
"""The plain Python pipeline `cairn ingest` is measured against (scripts/bench-ingest.sh).

    python ingest_peer.py MODEL_DIR FOLDER OUT.sqlite [--threads N] [--chunk-size 1500]

Every file of FOLDER, in name order: text out of it (pypdf for PDF, python-docx for DOCX,
lxml for HTML, the bytes for anything else), paragraphs packed into chunks of about
--chunk-size characters (Cairn's default size, so both embed about the same text), the chunks
embedded by sentence-transformers (the same MiniLM directory, batch 32, normalized), and
documents and chunks (the vector as a float32 blob) written to a fresh SQLite file in one
transaction per document. Prints `files F chunks C seconds S chars N` (S: from start, model
load included, as `cairn ingest`'s time includes its own; N: characters embedded).
"""

import argparse
import os
import re
import sqlite3
import sys
import time

T0 = time.perf_counter()


def extract(path: str) -> str:
    ext = os.path.splitext(path)[1].lower()
    if ext == ".pdf":
        from pypdf import PdfReader

        return "\n\n".join(page.extract_text() or "" for page in PdfReader(path).pages)
    if ext == ".docx":
        import docx

        return "\n\n".join(p.text for p in docx.Document(path).paragraphs)
    if ext in (".html", ".htm"):
        import lxml.html

        root = lxml.html.parse(path).getroot()
        for bad in root.xpath("//script|//style|//head"):
            bad.drop_tree()
        # Block elements end a paragraph: a blank line after each, then all visible text.
        for el in root.iter("p", "div", "li", "pre", "h1", "h2", "h3", "h4", "h5", "h6",
                            "td", "th", "tr", "dt", "dd", "table", "blockquote", "br"):
            el.tail = "\n\n" + (el.tail or "")
        paras = (" ".join(p.split()) for p in re.split(r"\n\s*\n", root.text_content()))
        return "\n\n".join(p for p in paras if p)
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def chunks(text: str, size: int) -> list[str]:
    out, cur = [], ""
    for para in re.split(r"\n\s*\n", text):
        para = para.strip()
        if not para:
            continue
        while len(para) > size:
            cut = para.rfind(" ", 0, size)
            cut = cut if cut > size // 2 else size
            if cur:
                out.append(cur)
                cur = ""
            out.append(para[:cut])
            para = para[cut:].strip()
        if cur and len(cur) + 2 + len(para) > size:
            out.append(cur)
            cur = ""
        cur = f"{cur}\n\n{para}" if cur else para
    if cur:
        out.append(cur)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("folder")
    ap.add_argument("out")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--chunk-size", type=int, default=1500)
    args = ap.parse_args()

    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer

    if args.threads:
        torch.set_num_threads(args.threads)
    model = SentenceTransformer(args.model_dir, device="cpu")
    if os.path.exists(args.out):
        os.remove(args.out)
    db = sqlite3.connect(args.out)
    db.executescript(
        "PRAGMA journal_mode=WAL;"
        "CREATE TABLE documents (id INTEGER PRIMARY KEY, path TEXT NOT NULL, chars INTEGER NOT NULL);"
        "CREATE TABLE chunks (id INTEGER PRIMARY KEY, document_id INTEGER NOT NULL REFERENCES documents(id),"
        " idx INTEGER NOT NULL, content TEXT NOT NULL, embedding BLOB NOT NULL);"
    )
    files = sorted(
        os.path.join(root, f)
        for root, _, names in os.walk(args.folder)
        for f in names
        if not f.startswith(".")
    )
    total = 0
    chars = 0
    for path in files:
        text = extract(path)
        parts = chunks(text, args.chunk_size)
        vectors = (
            model.encode(parts, batch_size=32, normalize_embeddings=True)
            if parts
            else np.zeros((0, 384), dtype=np.float32)
        )
        with db:
            cur = db.execute("INSERT INTO documents (path, chars) VALUES (?, ?)", (path, len(text)))
            db.executemany(
                "INSERT INTO chunks (document_id, idx, content, embedding) VALUES (?, ?, ?, ?)",
                [
                    (cur.lastrowid, i, p, np.asarray(v, dtype=np.float32).tobytes())
                    for i, (p, v) in enumerate(zip(parts, vectors))
                ],
            )
        total += len(parts)
        chars += sum(len(p) for p in parts)
    db.close()
    print(f"files {len(files)} chunks {total} seconds {time.perf_counter() - T0:.2f} chars {chars}")


if __name__ == "__main__":
    sys.exit(main())
