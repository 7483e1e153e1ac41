-- Cairn schema, SQLite (WAL, FTS5, embeddings as little-endian f32 blobs).
-- Mirrors postgres_init.sql table for table; differences are noted inline.
CREATE TABLE teams (
    id          INTEGER PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE CHECK (length(name) > 0),
    created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

CREATE TABLE users (
    id          INTEGER PRIMARY KEY,
    team_id     INTEGER NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
    name        TEXT NOT NULL CHECK (length(name) > 0),
    role        TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'member', 'viewer')),
    created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    UNIQUE (team_id, name)
);

CREATE TABLE api_tokens (
    id           INTEGER PRIMARY KEY,
    user_id      INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    token_hash   TEXT NOT NULL UNIQUE,
    label        TEXT,
    created_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    last_used_at TEXT,
    revoked_at   TEXT
);
CREATE INDEX api_tokens_user ON api_tokens (user_id);

CREATE TABLE corpora (
    id          INTEGER PRIMARY KEY,
    team_id     INTEGER REFERENCES teams(id) ON DELETE CASCADE,
    name        TEXT NOT NULL CHECK (length(name) > 0),
    description TEXT,
    system      INTEGER NOT NULL DEFAULT 0 CHECK (system IN (0, 1)),
    created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    CHECK (system = (team_id IS NULL)),
    UNIQUE (team_id, name)
);
CREATE UNIQUE INDEX corpora_system_name ON corpora (name) WHERE team_id IS NULL;

CREATE TABLE content_blobs (
    id           INTEGER PRIMARY KEY,
    content_hash TEXT NOT NULL UNIQUE,
    mime_type    TEXT NOT NULL,
    size         INTEGER NOT NULL CHECK (size >= 0),
    storage_uri  TEXT NOT NULL,
    created_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

CREATE TABLE documents (
    id              INTEGER PRIMARY KEY,
    team_id         INTEGER NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
    corpus_id       INTEGER NOT NULL REFERENCES corpora(id) ON DELETE CASCADE,
    owner_id        INTEGER NOT NULL REFERENCES users(id),
    visibility      TEXT NOT NULL CHECK (visibility IN ('team', 'private')),
    title           TEXT NOT NULL,
    filename        TEXT,
    mime_type       TEXT NOT NULL,
    source_url      TEXT,
    current_version INTEGER NOT NULL DEFAULT 1 CHECK (current_version >= 1),
    chunk_count     INTEGER NOT NULL DEFAULT 0 CHECK (chunk_count >= 0),
    created_at      TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    updated_at      TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX documents_team_corpus ON documents (team_id, corpus_id);
CREATE INDEX documents_corpus ON documents (corpus_id);

CREATE TABLE document_versions (
    id              INTEGER PRIMARY KEY,
    document_id     INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    version         INTEGER NOT NULL CHECK (version >= 1),
    blob_id         INTEGER NOT NULL REFERENCES content_blobs(id),
    extracted_chars INTEGER NOT NULL DEFAULT 0,
    created_at      TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    UNIQUE (document_id, version)
);
CREATE INDEX document_versions_blob ON document_versions (blob_id);

-- embedding: 384 little-endian f32 (1536 bytes); the vector channel keeps an in-memory
-- matrix per team, loaded once and kept in step with writes.
CREATE TABLE chunks (
    id          INTEGER PRIMARY KEY,
    team_id     INTEGER NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
    document_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    version     INTEGER NOT NULL,
    corpus_id   INTEGER NOT NULL REFERENCES corpora(id) ON DELETE CASCADE,
    chunk_index INTEGER NOT NULL CHECK (chunk_index >= 0),
    content     TEXT NOT NULL,
    section     TEXT,
    page        INTEGER,
    metadata    TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(metadata)),
    embedding   BLOB CHECK (embedding IS NULL OR length(embedding) = 1536),
    FOREIGN KEY (document_id, version) REFERENCES document_versions (document_id, version) ON DELETE CASCADE,
    UNIQUE (document_id, version, chunk_index)
);
CREATE INDEX chunks_team_corpus ON chunks (team_id, corpus_id);

-- Lexical channel: external-content FTS5 over chunks, kept in step by triggers.
-- bm25() column weights put `section` (the heading) above `content` at query time.
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

CREATE TABLE kg_entities (
    id            INTEGER PRIMARY KEY,
    team_id       INTEGER NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
    type          TEXT NOT NULL CHECK (length(type) > 0),
    name          TEXT NOT NULL CHECK (length(name) > 0),
    name_norm     TEXT NOT NULL CHECK (length(name_norm) > 0),
    description   TEXT,
    embedding     BLOB CHECK (embedding IS NULL OR length(embedding) = 1536),
    first_seen_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    UNIQUE (team_id, type, name_norm)
);
CREATE INDEX kg_entities_name_norm ON kg_entities (team_id, name_norm);

CREATE TABLE kg_relations (
    id            INTEGER PRIMARY KEY,
    team_id       INTEGER NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
    subject_id    INTEGER NOT NULL REFERENCES kg_entities(id) ON DELETE CASCADE,
    -- lower_snake_case (SQLite has no regex: the GLOBs say the same as the PostgreSQL check)
    predicate     TEXT NOT NULL CHECK (
        predicate GLOB '[a-z]*' AND predicate NOT GLOB '*[^a-z0-9_]*'
        AND predicate NOT GLOB '*__*' AND predicate NOT GLOB '*_'
    ),
    object_id     INTEGER NOT NULL REFERENCES kg_entities(id) ON DELETE CASCADE,
    first_seen_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    UNIQUE (team_id, subject_id, predicate, object_id)
);
CREATE INDEX kg_relations_object ON kg_relations (object_id);

CREATE TABLE kg_mentions (
    id           INTEGER PRIMARY KEY,
    team_id      INTEGER NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
    entity_id    INTEGER REFERENCES kg_entities(id) ON DELETE CASCADE,
    relation_id  INTEGER REFERENCES kg_relations(id) ON DELETE CASCADE,
    document_id  INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    version      INTEGER NOT NULL,
    snippet      TEXT NOT NULL CHECK (length(snippet) > 0),
    char_start   INTEGER CHECK (char_start >= 0),
    extracted_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    CHECK ((entity_id IS NULL) <> (relation_id IS NULL))
);
CREATE INDEX kg_mentions_entity ON kg_mentions (entity_id) WHERE entity_id IS NOT NULL;
CREATE INDEX kg_mentions_relation ON kg_mentions (relation_id) WHERE relation_id IS NOT NULL;
CREATE INDEX kg_mentions_document ON kg_mentions (document_id, version);

CREATE TABLE kg_extractions (
    document_id  INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    version      INTEGER NOT NULL,
    entities     INTEGER NOT NULL DEFAULT 0,
    relations    INTEGER NOT NULL DEFAULT 0,
    extractor    TEXT NOT NULL,
    extracted_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (document_id, version)
);

CREATE TABLE jobs (
    id                  INTEGER PRIMARY KEY,
    team_id             INTEGER NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
    corpus_id           INTEGER REFERENCES corpora(id) ON DELETE SET NULL,
    kind                TEXT NOT NULL,
    payload             TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(payload)),
    state               TEXT NOT NULL DEFAULT 'queued'
                        CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
    stage               TEXT,
    progress            TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(progress)),
    attempts            INTEGER NOT NULL DEFAULT 0,
    max_attempts        INTEGER NOT NULL DEFAULT 3,
    run_after           TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    error               TEXT,
    result              TEXT CHECK (result IS NULL OR json_valid(result)),
    result_delivered_at TEXT,
    lease_owner         TEXT,
    lease_until         TEXT,
    created_by          INTEGER REFERENCES users(id) ON DELETE SET NULL,
    created_at          TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    updated_at          TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX jobs_claimable ON jobs (run_after) WHERE state IN ('queued', 'running');
CREATE INDEX jobs_team ON jobs (team_id, created_at);

CREATE TABLE usage (
    id            INTEGER PRIMARY KEY,
    team_id       INTEGER NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
    kind          TEXT NOT NULL CHECK (kind IN ('embed', 'llm')),
    model         TEXT NOT NULL,
    input_tokens  INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd      REAL NOT NULL DEFAULT 0,
    job_id        INTEGER REFERENCES jobs(id) ON DELETE SET NULL,
    at            TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX usage_team_at ON usage (team_id, at);

CREATE TABLE audit (
    id      INTEGER PRIMARY KEY,
    team_id INTEGER REFERENCES teams(id) ON DELETE CASCADE,
    user_id INTEGER REFERENCES users(id) ON DELETE SET NULL,
    action  TEXT NOT NULL,
    target  TEXT,
    at      TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX audit_team_at ON audit (team_id, at);
