-- Named pipelines per project, every saved version immutable (spec
-- pipelines.md "Versions and ticket types"). Version 0 is Ballet's template
-- and is never stored.
CREATE TABLE pipeline_versions (
    project_id TEXT    NOT NULL REFERENCES projects (id),
    name       TEXT    NOT NULL,
    version    INTEGER NOT NULL CHECK (version >= 1),
    definition TEXT    NOT NULL, -- JSON, as pipeline.Definition marshals it
    created_by TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (project_id, name, version)
);
