-- Lexical channel: one posting per (term, chunk) of every current chunk, and per-document
-- totals; BM25 is computed over them at query time (server/src/store/lexical.rs).
DROP INDEX IF EXISTS chunks_search_tsv;
ALTER TABLE chunks DROP COLUMN IF EXISTS search_tsv;

CREATE TABLE lexical_postings (
    term        TEXT NOT NULL,
    chunk_id    BIGINT NOT NULL,
    document_id BIGINT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    tf_body     INTEGER NOT NULL CHECK (tf_body >= 0),
    tf_heading  INTEGER NOT NULL CHECK (tf_heading >= 0),
    len         INTEGER NOT NULL CHECK (len >= 0),
    -- Covering: a term's postings are read from the index alone.
    PRIMARY KEY (term, chunk_id) INCLUDE (document_id, tf_body, tf_heading, len)
);
-- A document's postings leave with its chunks (store::lexical::forget_document) or with it.
CREATE INDEX lexical_postings_document ON lexical_postings (document_id);

-- Document frequency per term and readability scope: a corpus, and the owner of private
-- documents (0 for team-visible ones). A searcher's df is the sum over the corpora searched
-- and the scopes 0 and their own id: exactly the readable rule, without reading postings.
CREATE TABLE lexical_terms (
    term      TEXT NOT NULL,
    corpus_id BIGINT NOT NULL REFERENCES corpora(id) ON DELETE CASCADE,
    owner_key BIGINT NOT NULL,
    df        INTEGER NOT NULL,
    PRIMARY KEY (term, corpus_id, owner_key)
);

CREATE TABLE lexical_documents (
    document_id BIGINT PRIMARY KEY REFERENCES documents(id) ON DELETE CASCADE,
    chunks      INTEGER NOT NULL CHECK (chunks >= 0),
    terms       INTEGER NOT NULL CHECK (terms >= 0)
);
