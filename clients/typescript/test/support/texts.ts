/** The service's texts (docs/design.md §3) the tests compare with what a caller or a model reads, to the letter. */

/** The owner's own denial of a call, no reason. */
export const DENIED_BY_OWNER = (tool: string) =>
    `Error: approval_denied (decided_by: run_owner). The approval for tool "${tool}" was declined by the user who ` +
    "started this run, the person you are talking to. Nothing was executed. Tell them that they declined the " +
    "approval themselves, not the system or an operator, and ask whether the change should be proposed again.";

/** The owner's own denial of a write with the reason `skip`, as a "never" rule gives it. */
export const NEVER_BY_OWNER = (tool: string) =>
    `Error: approval_denied (decided_by: run_owner, reason: skip). The approval for tool "${tool}" was declined by the ` +
    "user who started this run, the person you are talking to. Nothing was executed. Tell them that they declined " +
    "the approval themselves, not the system or an operator, and do not propose this change again.";

/** The edit note of the owner's own edit. */
export const EDITED_BY_OWNER = (args: string) =>
    "Note: approval_edited (decided_by: run_owner). The arguments of this call were changed before it was " +
    "approved, by the user who started this run, the person you are talking to; it ran with these arguments " +
    `instead of the ones you proposed: ${args}`;
