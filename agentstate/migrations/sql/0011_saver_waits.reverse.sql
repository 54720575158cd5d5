-- 0011, undone: the functions as the migrations before it left them.

DROP FUNCTION agentstate_put_checkpoint_writes(text, text, text, bytea, boolean);

-- A checkpoint with its channel values (agentstate.backends.chains: p_values as
-- records on those of p_base, a checkpoint of the namespace; none: a snapshot);
-- a fork (its parent already has another child, or a second root) is marked, or
-- refused with p_refuse. A base not stored (deleted since the saver wrote on it)
-- writes nothing and answers rebase: the saver puts a snapshot instead.
--
-- This function and agentstate_checkpoint, the hot path, keep one plan for each of
-- their statements (plan_cache_mode): with the default, PL/pgSQL plans most of them
-- again on every call, since a plan for the call's values looks cheaper than the
-- generic one by the estimates; all their lookups are by a unique key, so the
-- generic plan is the one they would pick anyway.
CREATE OR REPLACE FUNCTION agentstate_put_checkpoint(
    p_thread text, p_ns text, p_id text, p_parent text, p_checkpoint jsonb, p_metadata jsonb,
    p_values bytea, p_base text, p_refuse boolean
) RETURNS jsonb
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_thread bigint := agentstate_touch_thread(p_thread);
    v_sibling text;
    v_step text := p_metadata ->> 'step';
    v_writes bytea;
BEGIN
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

-- A task's pending writes (p_writes: agentstate.backends.chains' form of the arrays),
-- appended to its checkpoint's row, which is locked (the tasks of one step queue on
-- it for the moment of the update); a call already appended is not appended again,
-- unless it writes a special channel (negative idx), whose last write is kept. A
-- checkpoint not stored yet (LangGraph may put a step's writes before it) keeps them
-- as rows, one per write, as earlier releases did, until its put takes them in: a
-- special channel's replaces the stored one, any other is kept as first written.
CREATE OR REPLACE FUNCTION agentstate_put_checkpoint_writes(
    p_thread text, p_ns text, p_id text, p_task text, p_path text, p_writes bytea,
    p_idx integer[], p_channels text[], p_types text[], p_blobs bytea[]
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_thread bigint;
    v_row bigint;
    v_writes bytea;
BEGIN
    SELECT id INTO v_thread FROM agentstate_thread WHERE thread_id = p_thread;
    IF v_thread IS NULL THEN
        v_thread := agentstate_touch_thread(p_thread);
    END IF;
    SELECT c.id, c.writes INTO v_row, v_writes FROM agentstate_checkpoint c
    WHERE c.thread_id = v_thread AND c.checkpoint_ns = p_ns AND c.checkpoint_id = p_id
    FOR NO KEY UPDATE;
    IF v_row IS NULL THEN
        -- a put of the checkpoint under way holds the thread's row: wait for it to
        -- end, and a put that starts now waits for these rows, which it takes in
        PERFORM FROM agentstate_thread WHERE id = v_thread FOR SHARE;
        SELECT c.id, c.writes INTO v_row, v_writes FROM agentstate_checkpoint c
        WHERE c.thread_id = v_thread AND c.checkpoint_ns = p_ns AND c.checkpoint_id = p_id
        FOR NO KEY UPDATE;
    END IF;
    IF v_row IS NOT NULL THEN
        IF v_writes IS NULL OR position(p_writes IN v_writes) = 0 OR 0 > ANY (p_idx) THEN
            UPDATE agentstate_checkpoint SET writes = coalesce(writes, ''::bytea) || p_writes
            WHERE id = v_row;
        END IF;
        RETURN '{}'::jsonb;
    END IF;
    INSERT INTO agentstate_checkpointwrite
        (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob)
    SELECT v_thread, p_ns, p_id, p_task, p_path, x.idx, x.channel, x.type, x.blob
    FROM unnest(p_idx, p_channels, p_types, p_blobs) AS x(idx, channel, type, blob)
    WHERE x.idx >= 0
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO NOTHING;
    INSERT INTO agentstate_checkpointwrite
        (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob)
    SELECT v_thread, p_ns, p_id, p_task, p_path, x.idx, x.channel, x.type, x.blob
    FROM unnest(p_idx, p_channels, p_types, p_blobs) AS x(idx, channel, type, blob)
    WHERE x.idx < 0
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE SET
        channel = EXCLUDED.channel, type = EXCLUDED.type, blob = EXCLUDED.blob,
        task_path = EXCLUDED.task_path;
    RETURN '{}'::jsonb;
END $$;

DROP FUNCTION agentstate_put_lock;

DROP FUNCTION agentstate_chain_writes;
