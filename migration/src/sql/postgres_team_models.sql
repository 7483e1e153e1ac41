-- A team's own LLM endpoint per role (seed 001, KG-7). The API key is sealed
-- (XChaCha20-Poly1305 under the instance's secret key, bound to the team and role) and never
-- leaves the server in a reply; NULL means no key.
CREATE TABLE team_models (
    team_id        BIGINT NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
    role           TEXT NOT NULL CHECK (role IN ('chat', 'utility')),
    url            TEXT NOT NULL CHECK (length(url) > 0),
    model          TEXT NOT NULL CHECK (length(model) > 0),
    api_key_sealed TEXT,
    price_input    DOUBLE PRECISION NOT NULL DEFAULT 0 CHECK (price_input >= 0),
    price_output   DOUBLE PRECISION NOT NULL DEFAULT 0 CHECK (price_output >= 0),
    updated_by     BIGINT REFERENCES users(id) ON DELETE SET NULL,
    updated_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (team_id, role)
);

-- Which role an `llm` usage row was spent on (NULL for embeddings and older rows).
ALTER TABLE usage ADD COLUMN role TEXT CHECK (role IS NULL OR role IN ('chat', 'utility'));
