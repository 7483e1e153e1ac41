-- Lexical channel: postings packed per (term, document, part) (server/src/store/lexical.rs
-- has the encoding). Every document is indexed again at start-up (Store::backfill_lexical).
DROP TABLE IF EXISTS lexical_postings;
DELETE FROM lexical_documents;
DELETE FROM lexical_terms;

-- WITHOUT ROWID: rows are stored in key order, so a term's rows are neighbours on disk
-- (a rowid table kept them in insertion order, one page per document per term). Parts of at
-- most ~1 KB stay inside their b-tree page (no overflow pages).
CREATE TABLE lexical_blocks (
    term        TEXT NOT NULL,
    document_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    part        INTEGER NOT NULL CHECK (part >= 0),
    -- How many chunks this part's postings are from.
    chunks      INTEGER NOT NULL CHECK (chunks > 0),
    postings    BLOB NOT NULL,
    PRIMARY KEY (term, document_id, part)
) WITHOUT ROWID;
-- A document's blocks leave with its chunks (store::lexical::forget_document) or with it.
CREATE INDEX lexical_blocks_document ON lexical_blocks (document_id);
