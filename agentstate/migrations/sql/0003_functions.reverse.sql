-- Migration 0003 undone: every agentstate_* function dropped, the outbox
-- trigger with its function.
DO $$ DECLARE f regprocedure; BEGIN
  FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
    JOIN pg_namespace n ON n.oid = p.pronamespace
    WHERE n.nspname = current_schema() AND p.proname LIKE 'agentstate\_%'
  LOOP EXECUTE 'DROP FUNCTION ' || f || ' CASCADE'; END LOOP;
END $$;
