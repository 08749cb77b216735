-- ListByPrincipal walks a principal's tasks newest first along this index,
-- from a cursor's position to the end of a page.
CREATE INDEX tasks_principal_created ON tasks (principal, created_at DESC, key);
