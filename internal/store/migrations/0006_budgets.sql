-- A project's spend per day is a sum over the runs that finished that day.
CREATE INDEX runs_project_finished ON runs (project_id, finished_at);
