-- Back to one posting row per (term, chunk); the server indexes every document again.
DROP TABLE IF EXISTS lexical_blocks;
DELETE FROM lexical_documents;
DELETE FROM lexical_terms;
CREATE TABLE lexical_postings (
    term        TEXT NOT NULL,
    chunk_id    BIGINT NOT NULL,
    document_id BIGINT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    tf_body     INTEGER NOT NULL CHECK (tf_body >= 0),
    tf_heading  INTEGER NOT NULL CHECK (tf_heading >= 0),
    len         INTEGER NOT NULL CHECK (len >= 0),
    PRIMARY KEY (term, chunk_id) INCLUDE (document_id, tf_body, tf_heading, len)
);
CREATE INDEX lexical_postings_document ON lexical_postings (document_id);
