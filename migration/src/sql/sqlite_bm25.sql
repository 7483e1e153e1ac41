-- Lexical channel: one posting per (term, chunk) of every current chunk, and per-document
-- totals; BM25 is computed over them at query time (server/src/store/lexical.rs).
DROP TRIGGER IF EXISTS chunks_fts_insert;
DROP TRIGGER IF EXISTS chunks_fts_delete;
DROP TRIGGER IF EXISTS chunks_fts_update;
DROP TABLE IF EXISTS chunks_fts;

CREATE TABLE lexical_postings (
    term        TEXT NOT NULL,
    chunk_id    INTEGER NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
    document_id INTEGER NOT NULL,
    tf_body     INTEGER NOT NULL CHECK (tf_body >= 0),
    tf_heading  INTEGER NOT NULL CHECK (tf_heading >= 0),
    len         INTEGER NOT NULL CHECK (len >= 0),
    PRIMARY KEY (term, chunk_id)
) WITHOUT ROWID;
CREATE INDEX lexical_postings_chunk ON lexical_postings (chunk_id);

CREATE TABLE lexical_documents (
    document_id INTEGER PRIMARY KEY REFERENCES documents(id) ON DELETE CASCADE,
    chunks      INTEGER NOT NULL CHECK (chunks >= 0),
    terms       INTEGER NOT NULL CHECK (terms >= 0)
);
