-- flows.pull_request was written with Go's field names (forge.PullRequest
-- had no JSON tags); it now uses the API's snake_case names.
UPDATE flows SET pull_request = json_object(
    'number', json_extract(pull_request, '$.Number'),
    'url', json_extract(pull_request, '$.URL'),
    'branch', json_extract(pull_request, '$.Branch'),
    'base', json_extract(pull_request, '$.Base'),
    'head_sha', json_extract(pull_request, '$.HeadSHA'))
WHERE pull_request IS NOT NULL AND pull_request != '' AND json_extract(pull_request, '$.HeadSHA') IS NOT NULL;
