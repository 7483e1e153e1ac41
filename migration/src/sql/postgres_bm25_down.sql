-- Back to the generated, weighted tsvector.
DROP TABLE IF EXISTS lexical_postings;
DROP TABLE IF EXISTS lexical_documents;
DROP TABLE IF EXISTS lexical_terms;
ALTER TABLE chunks ADD COLUMN search_tsv tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('english', coalesce(section, '')), 'A') ||
    setweight(to_tsvector('english', content), 'D')
) STORED;
CREATE INDEX chunks_search_tsv ON chunks USING gin (search_tsv);
