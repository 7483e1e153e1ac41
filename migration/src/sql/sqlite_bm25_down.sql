-- Back to FTS5 (rebuilt from the chunks).
DROP TABLE IF EXISTS lexical_postings;
DROP TABLE IF EXISTS lexical_documents;
DROP TABLE IF EXISTS lexical_terms;
CREATE VIRTUAL TABLE chunks_fts USING fts5(
    section, content, content = 'chunks', content_rowid = 'id', tokenize = 'porter unicode61'
);
CREATE TRIGGER chunks_fts_insert AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts (rowid, section, content) VALUES (new.id, new.section, new.content);
END;
CREATE TRIGGER chunks_fts_delete AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts (chunks_fts, rowid, section, content)
    VALUES ('delete', old.id, old.section, old.content);
END;
CREATE TRIGGER chunks_fts_update AFTER UPDATE OF section, content ON chunks BEGIN
    INSERT INTO chunks_fts (chunks_fts, rowid, section, content)
    VALUES ('delete', old.id, old.section, old.content);
    INSERT INTO chunks_fts (rowid, section, content) VALUES (new.id, new.section, new.content);
END;
INSERT INTO chunks_fts (chunks_fts) VALUES ('rebuild');
