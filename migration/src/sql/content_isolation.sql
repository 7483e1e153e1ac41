-- An isolated team's content hash is an HMAC keyed for the team (under the instance's secret
-- key), so the same bytes uploaded by it and by any other team are two blobs, two files.
ALTER TABLE teams ADD COLUMN isolate_content BOOLEAN NOT NULL DEFAULT FALSE;
