-- The model that served a run's session, as its runner reported it from the
-- agent CLI's output (NULL: not reported). runs.model stays the model the
-- stage named ("" for the adapter's default).
ALTER TABLE runs ADD COLUMN used_model TEXT;
