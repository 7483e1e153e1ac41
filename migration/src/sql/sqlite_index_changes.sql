-- Every committed change to a document's chunks or access facts, in commit order, so that each
-- process holding an in-memory vector index (SQLite's, `cairn::store::vindex`) brings it up to
-- date before a search, whichever process wrote (issue 12). Triggers write it inside the
-- writing transaction: no write path can forget. Ingest, a new version, a move, a visibility
-- change and a delete all touch the `documents` row.
CREATE TABLE index_changes (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    document_id INTEGER NOT NULL
);
CREATE TRIGGER documents_changed_insert AFTER INSERT ON documents BEGIN
    INSERT INTO index_changes (document_id) VALUES (new.id);
END;
CREATE TRIGGER documents_changed_update AFTER UPDATE OF team_id, corpus_id, owner_id, visibility, current_version, chunk_count ON documents BEGIN
    INSERT INTO index_changes (document_id) VALUES (new.id);
END;
CREATE TRIGGER documents_changed_delete AFTER DELETE ON documents BEGIN
    INSERT INTO index_changes (document_id) VALUES (old.id);
END;
