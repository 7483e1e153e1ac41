-- Lexical channel: postings packed per (term, document, part) (server/src/store/lexical.rs
-- has the encoding). Every document is indexed again at start-up (Store::backfill_lexical).
DROP TABLE IF EXISTS lexical_postings;
DELETE FROM lexical_documents;
DELETE FROM lexical_terms;

CREATE TABLE lexical_blocks (
    term        TEXT NOT NULL,
    document_id BIGINT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    -- A document's postings of one term are split into parts of at most ~1 KB, so every row
    -- fits in an index entry.
    part        INTEGER NOT NULL CHECK (part >= 0),
    -- How many chunks this part's postings are from.
    chunks      INTEGER NOT NULL CHECK (chunks > 0),
    postings    BYTEA NOT NULL,
    -- The key carries the postings: a query reads a term's rows in key order from the index
    -- alone (an index-only scan), not one heap page per document the term occurs in.
    PRIMARY KEY (term, document_id, part) INCLUDE (chunks, postings)
);
-- A document's blocks leave with its chunks (store::lexical::forget_document) or with it.
CREATE INDEX lexical_blocks_document ON lexical_blocks (document_id);
