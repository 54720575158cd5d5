-- 0019, undone: the functions as the migrations before it left them.

-- The thread's row id, made or locked (FOR NO KEY UPDATE, as an update locks it), so
-- that the puts of one thread queue on it. Its updated_at is indexed (THREAD_TTL), so
-- setting it is never a HOT update: it is set to now only when more than a minute old
-- (base.THREAD_TOUCH), and the sweep allows for that minute.
CREATE FUNCTION agentstate_touch_thread(p_thread text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    tid bigint;
    touched timestamptz;
BEGIN
    SELECT id, updated_at INTO tid, touched FROM agentstate_thread
    WHERE thread_id = p_thread FOR NO KEY UPDATE;
    IF tid IS NULL THEN
        INSERT INTO agentstate_thread AS t (thread_id, created_at, updated_at)
        VALUES (p_thread, now(), now())
        ON CONFLICT (thread_id) DO UPDATE SET updated_at = now()
        RETURNING t.id INTO tid;
    ELSIF touched < now() - interval '1 minute' THEN
        UPDATE agentstate_thread SET updated_at = now() WHERE id = tid;
    END IF;
    RETURN tid;
END $$;

-- A checkpoint with its channel values (agentstate.backends.chains: p_values as
-- records on those of p_base, a checkpoint of the namespace; none: a snapshot);
-- a fork (its parent already has another child, or a second root) is marked, or
-- refused with p_refuse. A base not stored (deleted since the saver wrote on it)
-- writes nothing and answers rebase: the saver puts a snapshot instead. p_writes:
-- task writes to it (agentstate.backends.chains' form) that came to the saver
-- before it, stored with it after those stored before it as rows.
--
-- A put holds its thread's put lock (agentstate_put_lock) until it ends, so that a
-- task's writes arriving while it is under way wait for it (below).
--
-- This function and agentstate_checkpoint, the hot path, keep one plan for each of
-- their statements (plan_cache_mode): with the default, PL/pgSQL plans most of them
-- again on every call, since a plan for the call's values looks cheaper than the
-- generic one by the estimates; all their lookups are by a unique key, so the
-- generic plan is the one they would pick anyway.
CREATE OR REPLACE FUNCTION agentstate_put_checkpoint(
    p_thread text, p_ns text, p_id text, p_parent text, p_checkpoint jsonb, p_metadata jsonb,
    p_values bytea, p_base text, p_refuse boolean, p_writes bytea
) RETURNS jsonb
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_thread bigint;
    v_sibling text;
    v_step text := p_metadata ->> 'step';
    v_writes bytea;
BEGIN
    PERFORM pg_advisory_xact_lock(agentstate_put_lock(), hashtext(p_thread));
    v_thread := agentstate_touch_thread(p_thread);
    IF p_parent IS NULL THEN
        SELECT checkpoint_id INTO v_sibling FROM agentstate_checkpoint
        WHERE thread_id = v_thread AND checkpoint_ns = p_ns AND parent_checkpoint_id IS NULL
          AND checkpoint_id <> p_id
        LIMIT 1;
    ELSE
        SELECT checkpoint_id INTO v_sibling FROM agentstate_checkpoint
        WHERE thread_id = v_thread AND checkpoint_ns = p_ns AND parent_checkpoint_id = p_parent
          AND checkpoint_id <> p_id
        LIMIT 1;
    END IF;
    IF v_sibling IS NOT NULL AND p_refuse THEN
        RETURN agentstate_refuse('HistoryForked', jsonb_build_object(
            'thread_id', p_thread, 'checkpoint_ns', p_ns, 'parent', p_parent,
            'head', v_sibling));
    END IF;
    IF p_base IS NOT NULL AND NOT EXISTS (
        SELECT FROM agentstate_checkpoint
        WHERE thread_id = v_thread AND checkpoint_ns = p_ns AND checkpoint_id = p_base
    ) THEN
        RETURN jsonb_build_object('forked', v_sibling IS NOT NULL, 'rebase', true);
    END IF;
    -- the writes of its tasks stored before it (LangGraph may put them first) join it
    WITH moved AS (
        DELETE FROM agentstate_checkpointwrite w
        WHERE w.thread_id = v_thread AND w.checkpoint_ns = p_ns AND w.checkpoint_id = p_id
        RETURNING w.id, w.task_id, w.task_path, w.idx, w.channel, w.type, w.blob
    )
    SELECT string_agg(
        agentstate_chain_field(m.task_id) || agentstate_chain_field(m.task_path)
        || int4send(m.idx) || agentstate_chain_field(m.channel) || agentstate_chain_field(m.type)
        || int4send(length(coalesce(m.blob, ''::bytea))) || coalesce(m.blob, ''::bytea),
        ''::bytea ORDER BY m.id)
    INTO v_writes FROM moved m;
    IF p_writes IS NOT NULL THEN
        v_writes := coalesce(v_writes, ''::bytea) || p_writes;
    END IF;
    INSERT INTO agentstate_checkpoint AS c
        (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata,
         run_id, step, forked, created_at, values, base_checkpoint_id, writes)
    VALUES (v_thread, p_ns, p_id, p_parent, p_checkpoint, p_metadata,
            p_metadata ->> 'run_id',
            CASE WHEN jsonb_typeof(p_metadata -> 'step') = 'number'
                      AND v_step ~ '^-?[0-9]{1,9}$' THEN v_step::integer END,
            v_sibling IS NOT NULL, now(), p_values, p_base, v_writes)
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET
        parent_checkpoint_id = EXCLUDED.parent_checkpoint_id, checkpoint = EXCLUDED.checkpoint,
        metadata = EXCLUDED.metadata, run_id = EXCLUDED.run_id, step = EXCLUDED.step,
        values = EXCLUDED.values, base_checkpoint_id = EXCLUDED.base_checkpoint_id,
        writes = CASE WHEN EXCLUDED.writes IS NULL THEN c.writes
                      ELSE coalesce(c.writes, ''::bytea) || EXCLUDED.writes END;
    RETURN jsonb_build_object('forked', v_sibling IS NOT NULL);
END $$;
