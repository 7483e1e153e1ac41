-- Lexical channel: one posting per (term, chunk) of every current chunk, and per-document
-- totals; BM25 is computed over them at query time (server/src/store/lexical.rs).
DROP INDEX IF EXISTS chunks_search_tsv;
ALTER TABLE chunks DROP COLUMN IF EXISTS search_tsv;

CREATE TABLE lexical_postings (
    term        TEXT NOT NULL,
    chunk_id    BIGINT NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
    document_id BIGINT NOT NULL,
    tf_body     INTEGER NOT NULL CHECK (tf_body >= 0),
    tf_heading  INTEGER NOT NULL CHECK (tf_heading >= 0),
    len         INTEGER NOT NULL CHECK (len >= 0),
    -- Covering: a term's postings are read from the index alone.
    PRIMARY KEY (term, chunk_id) INCLUDE (document_id, tf_body, tf_heading, len)
);
CREATE INDEX lexical_postings_chunk ON lexical_postings (chunk_id);

CREATE TABLE lexical_documents (
    document_id BIGINT PRIMARY KEY REFERENCES documents(id) ON DELETE CASCADE,
    chunks      INTEGER NOT NULL CHECK (chunks >= 0),
    terms       INTEGER NOT NULL CHECK (terms >= 0)
);
