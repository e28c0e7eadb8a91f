-- Runs in the provider's own format, kept whole (issue 31, DESIGN.md §14).
--
-- `format` is the format the run was registered in and answers in. Existing runs were all registered as OpenAI chat
-- messages, so the default is theirs. As in 0010, the rule is a domain's, and the domain gets its column before it
-- has a constraint: a column of a constrained domain added with a default makes Postgres rewrite the table.
--
-- `messages` keeps its name and holds the format's list (`messages`, `input` or `contents`) as the loop sent it: the
-- JSON text of the array, byte for byte, with what the service appends (results, later turns) after it. The
-- format's system member (`system`, `instructions` or `system_instruction`) is kept apart, in `system`, so that an
-- answer splices both in without parsing either; it is sealed like the transcript (`system_sealed`, associated data
-- `runs.system`) when keys are configured. Neither is checked here: a check on `runs` costs every decision's update
-- (0010), and the service writes exactly one of the pair or none.
--
-- `previous_turn_end` is the byte length of the list's text (in clear) through the previous turn's last message, set
-- when a turn is appended: the model input of that turn, read while the next one waits, is the text cut there. A
-- native transcript is never parsed to find the turn (OpenAI chat runs still find it by its call id, as rows appended
-- before this migration have no length).

create domain transcript_format as text;

alter table runs
    add column format transcript_format not null default 'openai-chat',
    add column system text,
    add column system_sealed bytea,
    add column previous_turn_end integer;

alter domain transcript_format add constraint transcript_format_known
    check (value in ('openai-chat', 'anthropic', 'openai-responses', 'gemini')) not valid;
alter domain transcript_format validate constraint transcript_format_known;
