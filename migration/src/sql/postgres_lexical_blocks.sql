-- Lexical channel: postings packed per (term, document) (server/src/store/lexical.rs has the
-- encoding). Every document is indexed again at start-up (Store::backfill_lexical).
DROP TABLE IF EXISTS lexical_postings;
DELETE FROM lexical_documents;
DELETE FROM lexical_terms;

CREATE TABLE lexical_blocks (
    term        TEXT NOT NULL,
    document_id BIGINT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    -- How many of the document's chunks hold the term (the postings in the block).
    chunks      INTEGER NOT NULL CHECK (chunks > 0),
    postings    BYTEA NOT NULL,
    PRIMARY KEY (term, document_id)
);
-- Large blocks are read whole on every query that names their term: out of line, not
-- compressed (decompression would cost more than the bytes it saves).
ALTER TABLE lexical_blocks ALTER COLUMN postings SET STORAGE EXTERNAL;
-- A document's blocks leave with its chunks (store::lexical::forget_document) or with it.
CREATE INDEX lexical_blocks_document ON lexical_blocks (document_id);
