ALTER TABLE usage DROP COLUMN role;
DROP TABLE team_models;
