-- Where a run came from (DESIGN.md §2, §19): an optional label the registration names (`mcp:github`, `chat`,
-- `ai-tasks`), shown in the run view, the inbox, the events and the approval mail and page. Null for a run that names
-- none, and for every run registered before this migration.
--
-- The check repeats the rule the API applies (src/domain/run_source.rs), as the backstop a check is: a label reaches
-- a mail's subject and an HTML page, so no row may hold one outside it. Adding a nullable column without a default
-- rewrites nothing, and the check has no row to scan but nulls.

alter table runs add column source text check (source ~ '^[A-Za-z0-9_.:-]{1,64}$');
