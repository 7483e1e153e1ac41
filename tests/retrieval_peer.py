#!/usr/bin/env python3
"""The retrieval test's reference pipeline: plain BM25, plain dense vectors, RRF k=60.

    python retrieval_peer.py INPUT.json OUTPUT.json      (python from scripts/peer-python.sh)

INPUT:  {"model_dir": "/path/to/all-MiniLM-L6-v2", "depth": 100,
         "chunks":  [{"id": 123, "document": "doc-key", "text": "...", "lexical_text": "..."}],
         "queries": [{"id": "d01", "query": "..."}]}
OUTPUT: {"queries": {"d01": {"bm25": [chunk ids, best first, at most depth],
                             "vector": [...], "rrf": [...]}},
         "seconds": {...}, "versions": {...}}

`text` is what Cairn embedded; `lexical_text` (optional, default `text`) is what Cairn's lexical
index saw, if that differs (say, with the heading path). It ranks exactly the chunks it is given (Cairn's own stored chunks), so Cairn's channels and
this pipeline are compared on identical passages. Nothing here is tuned:

- BM25: rank_bm25.BM25Okapi with its defaults (k1=1.5, b=0.75, epsilon=0.25). Tokens:
  lowercase, re.findall(r"\\w+"), minus the English stopword list below, Snowball English stems
  (PyStemmer). A chunk is a hit only when its score is > 0; at most `depth` hits.
- Vector: sentence-transformers on model_dir (its modules.json: BERT, mean pooling, normalize;
  max_seq_length 256 like Cairn's embedder), CPU, normalize_embeddings=True, cosine = dot
  product, top `depth`.
- RRF: k=60 over the two lists (each at most `depth` long), a rank-r hit adds 1/(60+r); ties
  by best rank in either list, then by chunk id (Cairn's `domain::search::rrf` order).
Ties within a channel keep the input order of `chunks` (stable sort).
"""
import json
import os
import re
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("OMP_NUM_THREADS", "2")

RRF_K = 60.0
THREADS = 2

# A standard English stopword list (NLTK's "english" list, lowercase, apostrophes dropped since
# \w+ splits on them: "don't" -> "don", "t").
STOPWORDS = frozenset("""
a about above after again against ain all am an and any are aren arent as at be because been
before being below between both but by can couldn couldnt d did didn didnt do does doesn doesnt
doing don dont down during each few for from further had hadn hadnt has hasn hasnt have haven
havent having he her here hers herself him himself his how i if in into is isn isnt it its itself
just ll m ma me mightn mightnt more most mustn mustnt my myself needn neednt no nor not now o of
off on once only or other our ours ourselves out over own re s same shan shant she shes should
shouldn shouldnt shouldve so some such t than that thatll the their theirs them themselves then
there these they this those through to too under until up ve very was wasn wasnt we were weren
werent what when where which while who whom why will with won wont wouldn wouldnt y you youd
youll your youre yours yourself yourselves youve
""".split())

_WORD = re.compile(r"\w+")


def make_tokenizer():
    import Stemmer

    stemmer = Stemmer.Stemmer("english")

    def tokenize(text):
        words = [w for w in _WORD.findall(text.lower()) if w not in STOPWORDS]
        return stemmer.stemWords(words)

    return tokenize


def top_ids(scores, ids, depth, positive_only):
    import numpy as np

    order = np.argsort(-scores, kind="stable")
    out = []
    for i in order:
        if len(out) >= depth:
            break
        if positive_only and not scores[i] > 0:
            break
        out.append(ids[i])
    return out


def rrf(vector, lexical):
    fused = {}  # chunk id -> [score, best rank]
    for ranking in (vector, lexical):
        seen = set()
        for rank, cid in enumerate(ranking, start=1):
            if cid in seen:
                continue
            seen.add(cid)
            e = fused.setdefault(cid, [0.0, rank])
            e[0] += 1.0 / (RRF_K + rank)
            e[1] = min(e[1], rank)
    return [cid for cid, _ in sorted(fused.items(), key=lambda kv: (-kv[1][0], kv[1][1], kv[0]))]


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: retrieval_peer.py INPUT.json OUTPUT.json")
    t_start = time.perf_counter()
    with open(sys.argv[1], encoding="utf-8") as f:
        job = json.load(f)
    depth = int(job.get("depth", 100))
    chunks = job["chunks"]
    queries = job["queries"]
    ids = [c["id"] for c in chunks]
    texts = [c["text"] for c in chunks]
    lexical_texts = [c.get("lexical_text", c["text"]) for c in chunks]
    seconds = {}

    t = time.perf_counter()
    import numpy as np
    import torch
    from rank_bm25 import BM25Okapi
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(THREADS)
    seconds["import"] = time.perf_counter() - t

    # BM25
    t = time.perf_counter()
    tokenize = make_tokenizer()
    bm25 = BM25Okapi([tokenize(x) for x in lexical_texts]) if chunks else None
    seconds["bm25_index"] = time.perf_counter() - t
    t = time.perf_counter()
    bm25_hits = {}
    for q in queries:
        terms = tokenize(q["query"])
        if bm25 is None or not terms:
            bm25_hits[q["id"]] = []
            continue
        bm25_hits[q["id"]] = top_ids(np.asarray(bm25.get_scores(terms)), ids, depth, True)
    seconds["bm25_query"] = time.perf_counter() - t

    # Vector
    t = time.perf_counter()
    model = SentenceTransformer(job["model_dir"], device="cpu")
    seconds["model_load"] = time.perf_counter() - t
    t = time.perf_counter()
    with torch.inference_mode():
        chunk_vecs = model.encode(texts, batch_size=32, normalize_embeddings=True,
                                  convert_to_numpy=True, show_progress_bar=False)
    seconds["embed_chunks"] = time.perf_counter() - t
    t = time.perf_counter()
    with torch.inference_mode():
        query_vecs = model.encode([q["query"] for q in queries], batch_size=32,
                                  normalize_embeddings=True, convert_to_numpy=True,
                                  show_progress_bar=False)
    seconds["embed_queries"] = time.perf_counter() - t
    t = time.perf_counter()
    vector_hits = {}
    if chunks:
        sims = np.asarray(query_vecs, dtype=np.float32) @ np.asarray(chunk_vecs, dtype=np.float32).T
        for qi, q in enumerate(queries):
            vector_hits[q["id"]] = top_ids(sims[qi], ids, depth, False)
    else:
        vector_hits = {q["id"]: [] for q in queries}
    seconds["vector_query"] = time.perf_counter() - t

    out = {q["id"]: {"bm25": bm25_hits[q["id"]], "vector": vector_hits[q["id"]],
                     "rrf": rrf(vector_hits[q["id"]], bm25_hits[q["id"]])[:depth]}
           for q in queries}
    seconds["total"] = time.perf_counter() - t_start
    import rank_bm25
    import sentence_transformers
    result = {
        "queries": out,
        "seconds": {k: round(v, 3) for k, v in seconds.items()},
        "versions": {"torch": torch.__version__, "sentence_transformers": sentence_transformers.__version__,
                     "rank_bm25": getattr(rank_bm25, "__version__", "0.2.2"), "numpy": np.__version__},
        "chunks": len(chunks),
        "max_seq_length": model.max_seq_length,
    }
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
