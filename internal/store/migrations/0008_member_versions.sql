-- Serializes changes to an organization's memberships, so that a rule over
-- them (an organization keeps an admin) is part of the guarded batch: every
-- membership change bumps the organization's row, and the rule is decided
-- on the memberships read with that version in one query. Two concurrent
-- demotions of the last two admins cannot both succeed: the second loses
-- its race and decides again.
CREATE TABLE member_versions (
    organization_id TEXT    PRIMARY KEY,
    version         INTEGER NOT NULL
);
