-- Document processing (seed 004: classify_document, extract_document, process_document).

-- taxonomy_seeded: the starter types were written once (an admin may delete them after).
-- extend_taxonomy: processDocument may add the type it suggests for a document nothing fits.
ALTER TABLE teams ADD COLUMN taxonomy_seeded BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE teams ADD COLUMN extend_taxonomy BOOLEAN NOT NULL DEFAULT FALSE;

-- A team's document types. schema: the JSON Schema subset of cairn-docproc's taxonomy module.
CREATE TABLE document_types (
    id          INTEGER PRIMARY KEY,
    team_id     INTEGER NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
    name        TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 64 AND name NOT GLOB '*[^a-z0-9_]*' AND substr(name, 1, 1) BETWEEN 'a' AND 'z'),
    description TEXT NOT NULL CHECK (length(description) > 0),
    schema      TEXT CHECK (schema IS NULL OR json_valid(schema)),
    origin      TEXT NOT NULL CHECK (origin IN ('starter', 'admin', 'suggested')),
    created_by  INTEGER REFERENCES users(id) ON DELETE SET NULL,
    created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    updated_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    UNIQUE (team_id, name)
);

-- The classification of one document version (the latest replaces an earlier one).
CREATE TABLE document_classifications (
    document_id INTEGER NOT NULL,
    version     INTEGER NOT NULL,
    team_id     INTEGER NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
    type_name   TEXT NOT NULL,
    confidence  REAL NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
    reason      TEXT NOT NULL,
    method      TEXT NOT NULL CHECK (method IN ('llm', 'zero_shot')),
    model       TEXT NOT NULL,
    created_by  INTEGER REFERENCES users(id) ON DELETE SET NULL,
    created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (document_id, version),
    FOREIGN KEY (document_id, version) REFERENCES document_versions (document_id, version) ON DELETE CASCADE
);

-- What processDocument found for one document version.
CREATE TABLE processing_results (
    id                INTEGER PRIMARY KEY,
    document_id       INTEGER NOT NULL,
    version           INTEGER NOT NULL,
    team_id           INTEGER NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
    job_id            INTEGER,
    type_name         TEXT NOT NULL,
    confidence        REAL NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
    method            TEXT NOT NULL CHECK (method IN ('llm', 'zero_shot')),
    extended_taxonomy BOOLEAN NOT NULL DEFAULT FALSE,
    schema_generated  BOOLEAN NOT NULL DEFAULT FALSE,
    schema            TEXT CHECK (schema IS NULL OR json_valid(schema)),
    result            TEXT NOT NULL CHECK (json_valid(result)),
    measured_schema   TEXT NOT NULL CHECK (json_valid(measured_schema)),
    created_by        INTEGER REFERENCES users(id) ON DELETE SET NULL,
    created_at        TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    FOREIGN KEY (document_id, version) REFERENCES document_versions (document_id, version) ON DELETE CASCADE
);
CREATE INDEX processing_results_document ON processing_results (document_id, id);
