-- 0013, undone: the functions as the migrations before it left them.

CREATE OR REPLACE FUNCTION agentstate_run_state(p_run agentstate_run) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('run', to_jsonb(p_run), 'records', agentstate_records_of(p_run.id))
$$;
