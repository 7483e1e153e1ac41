DROP TABLE processing_results;
DROP TABLE document_classifications;
DROP TABLE document_types;
ALTER TABLE teams DROP COLUMN extend_taxonomy;
ALTER TABLE teams DROP COLUMN taxonomy_seeded;
