-- Entity descriptions belong to the document version that gave them (issue 11): a reader sees
-- only descriptions from documents it can read. The anchor embedding ("name: description", or
-- the name alone) moves with its description, so ranking by meaning uses readable text only.
CREATE TABLE kg_descriptions (
    id          INTEGER PRIMARY KEY,
    team_id     INTEGER NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
    entity_id   INTEGER NOT NULL REFERENCES kg_entities(id) ON DELETE CASCADE,
    document_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    version     INTEGER NOT NULL,
    description TEXT CHECK (description IS NULL OR length(description) > 0),
    embedding   BLOB CHECK (embedding IS NULL OR length(embedding) = 1536),
    UNIQUE (entity_id, document_id)
);
CREATE INDEX kg_descriptions_document ON kg_descriptions (document_id);

-- The entity-wide description and anchor cannot be attributed to a document: they go, and
-- every document is extracted afresh by the next run (its marker goes too).
ALTER TABLE kg_entities DROP COLUMN description;
ALTER TABLE kg_entities DROP COLUMN embedding;
DELETE FROM kg_extractions;
