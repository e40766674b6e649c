-- How many commits the ticket's branch had ahead of the default branch
-- after a run (reported by its runner; NULL: not reported), and the flow's
-- latest such count (NULL: no agent stage reported one yet).
ALTER TABLE runs ADD COLUMN branch_ahead INTEGER;
ALTER TABLE flows ADD COLUMN branch_ahead INTEGER;
