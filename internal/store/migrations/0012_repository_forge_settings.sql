-- A project's repository on Gitea or GitHub: an optional API base that overrides the one derived
-- from its URL, and the reference (env:NAME) to the secret its forge signs webhook deliveries
-- with — never the secret. Owner: internal/tenancy.
ALTER TABLE projects ADD COLUMN repo_api_url TEXT;
ALTER TABLE projects ADD COLUMN repo_webhook_secret_ref TEXT;
