package schedule

// ReentrantBackoff lets a test take the retries of reentrant_call away,
// the negative control of the retrying task.
var ReentrantBackoff = &reentrantBackoff
