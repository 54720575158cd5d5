-- 0033: a LangGraph checkpoint's row holds at most 4,096 bytes of pending writes
-- (agentstate.backends.chains.HELD_WRITES). A task's writes were appended to it
-- whatever its size, each call copying what it held: the writes of a step of T
-- tasks cost time and WAL growing with T squared. A call that would take the row
-- past the bound now moves its writes, then itself, to rows; a checkpoint put again
-- takes its rows in before the writes it holds (rows are older).

CREATE OR REPLACE FUNCTION agentstate_put_checkpoint(
    p_thread text, p_ns text, p_id text, p_parent text, p_checkpoint jsonb, p_metadata jsonb,
    p_values bytea, p_base text, p_refuse boolean, p_writes bytea,
    p_parent_writes bytea[] DEFAULT NULL, p_parent_special boolean[] DEFAULT NULL
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
DECLARE
    v_locked boolean;
    v_thread bigint;
    v_touched timestamptz;
    v_sibling text;
    v_based boolean;
    v_early boolean;
    v_moved bytea;
    v_step integer := CASE WHEN jsonb_typeof(p_metadata -> 'step') = 'number'
                                AND (p_metadata ->> 'step') ~ '^-?[0-9]{1,9}$'
                           THEN (p_metadata ->> 'step')::integer END;
    v_writes bytea;
BEGIN
    v_locked := pg_advisory_xact_lock(agentstate_put_lock(), hashtext(p_thread)) IS NULL;
    SELECT id, updated_at INTO v_thread, v_touched FROM agentstate_thread
    WHERE thread_id = p_thread FOR NO KEY UPDATE;
    IF v_thread IS NULL THEN
        INSERT INTO agentstate_thread AS t (thread_id, created_at, updated_at)
        VALUES (p_thread, now(), now())
        ON CONFLICT (thread_id) DO UPDATE SET updated_at = now()
        RETURNING t.id INTO v_thread;
    ELSIF v_touched < now() - interval '1 minute' THEN
        UPDATE agentstate_thread SET updated_at = now() WHERE id = v_thread;
    END IF;
    -- a statement of its own, after the row's lock: it sees what the lock waited for
    SELECT (SELECT s.checkpoint_id FROM agentstate_checkpoint s
            WHERE s.thread_id = v_thread AND s.checkpoint_ns = p_ns
              AND s.parent_checkpoint_id = p_parent AND s.checkpoint_id <> p_id
            LIMIT 1),
           p_base IS NULL OR EXISTS (
               SELECT FROM agentstate_checkpoint b
               WHERE b.thread_id = v_thread AND b.checkpoint_ns = p_ns
                 AND b.checkpoint_id = p_base),
           EXISTS (
               SELECT FROM agentstate_checkpointwrite w
               WHERE w.thread_id = v_thread AND w.checkpoint_ns = p_ns
                 AND w.checkpoint_id = p_id)
    INTO v_sibling, v_based, v_early;
    IF p_parent IS NULL THEN
        -- a second root (the parent index holds the checkpoints with a parent only)
        SELECT s.checkpoint_id INTO v_sibling FROM agentstate_checkpoint s
        WHERE s.thread_id = v_thread AND s.checkpoint_ns = p_ns
          AND s.parent_checkpoint_id IS NULL AND s.checkpoint_id <> p_id
        LIMIT 1;
    END IF;
    IF v_sibling IS NOT NULL AND p_refuse THEN
        RETURN agentstate_refuse('HistoryForked', jsonb_build_object(
            'thread_id', p_thread, 'checkpoint_ns', p_ns, 'parent', p_parent,
            'head', v_sibling));
    END IF;
    IF NOT v_based THEN
        RETURN CASE WHEN v_sibling IS NULL THEN '{"forked": false, "rebase": true}'::jsonb
                    ELSE '{"forked": true, "rebase": true}'::jsonb END;
    END IF;
    IF v_early THEN
        -- the writes of its tasks stored before it (LangGraph may put them first) join it
        WITH moved AS (
            DELETE FROM agentstate_checkpointwrite w
            WHERE w.thread_id = v_thread AND w.checkpoint_ns = p_ns AND w.checkpoint_id = p_id
            RETURNING w.id, w.task_id, w.task_path, w.idx, w.channel, w.type, w.blob
        )
        SELECT string_agg(
            agentstate_chain_field(m.task_id) || agentstate_chain_field(m.task_path)
            || int4send(m.idx) || agentstate_chain_field(m.channel)
            || agentstate_chain_field(m.type)
            || int4send(length(coalesce(m.blob, ''::bytea))) || coalesce(m.blob, ''::bytea),
            ''::bytea ORDER BY m.id)
        INTO v_moved FROM moved m;
    END IF;
    v_writes := CASE WHEN v_moved IS NULL THEN p_writes
                     ELSE v_moved || coalesce(p_writes, ''::bytea) END;
    FOR i IN 1..coalesce(array_length(p_parent_writes, 1), 0) LOOP
        -- its own put lock, held here, never waits for itself
        PERFORM agentstate_put_checkpoint_writes(
            p_thread, p_ns, p_parent, p_parent_writes[i], p_parent_special[i]);
    END LOOP;
    -- DO NOTHING, then an update when stored already: an insert that may update
    -- builds its update at every call
    INSERT INTO agentstate_checkpoint
        (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata,
         run_id, step, forked, created_at, values, base_checkpoint_id, writes)
    VALUES (v_thread, p_ns, p_id, p_parent, p_checkpoint, p_metadata, p_metadata ->> 'run_id',
            v_step, v_sibling IS NOT NULL, now(), p_values, p_base, v_writes)
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO NOTHING;
    IF NOT FOUND THEN
        UPDATE agentstate_checkpoint c SET
            parent_checkpoint_id = p_parent, checkpoint = p_checkpoint, metadata = p_metadata,
            run_id = p_metadata ->> 'run_id', step = v_step, values = p_values,
            base_checkpoint_id = p_base,
            writes = CASE WHEN v_writes IS NULL THEN c.writes
                          ELSE coalesce(v_moved, ''::bytea) || coalesce(c.writes, ''::bytea)
                               || coalesce(p_writes, ''::bytea) END
        WHERE c.thread_id = v_thread AND c.checkpoint_ns = p_ns AND c.checkpoint_id = p_id;
    END IF;
    RETURN CASE WHEN v_sibling IS NULL THEN '{"forked": false}'::jsonb
                ELSE '{"forked": true}'::jsonb END;
END $$;

CREATE OR REPLACE FUNCTION agentstate_put_checkpoint_writes(
    p_thread text, p_ns text, p_id text, p_writes bytea, p_special boolean
) RETURNS jsonb
LANGUAGE plpgsql SET enable_seqscan = off SET jit = off AS $$
DECLARE
    v_thread bigint;
    v_row bigint;
    v_writes bytea;
    v_held constant integer := 4096;  -- chains.HELD_WRITES
BEGIN
    -- most calls: appended to a stored checkpoint's row that has room for them, in one
    -- statement (an update waiting for another reads its conditions again on the row
    -- that one left); the others are taken as they come below
    UPDATE agentstate_checkpoint c SET writes = coalesce(c.writes, ''::bytea) || p_writes
    WHERE c.thread_id = (SELECT t.id FROM agentstate_thread t WHERE t.thread_id = p_thread)
      AND c.checkpoint_ns = p_ns AND c.checkpoint_id = p_id
      AND coalesce(length(c.writes), 0) + length(p_writes) <= v_held
      AND (c.writes IS NULL OR p_special OR position(p_writes IN c.writes) = 0);
    IF FOUND THEN
        RETURN '{}'::jsonb;
    END IF;
    SELECT id INTO v_thread FROM agentstate_thread WHERE thread_id = p_thread;
    IF v_thread IS NOT NULL THEN
        SELECT c.id, c.writes INTO v_row, v_writes FROM agentstate_checkpoint c
        WHERE c.thread_id = v_thread AND c.checkpoint_ns = p_ns AND c.checkpoint_id = p_id
        FOR NO KEY UPDATE;
    END IF;
    IF v_row IS NULL THEN
        -- the wait comes before anything is written or locked here, so that the put
        -- waited for never waits for this call in turn
        PERFORM pg_advisory_lock_shared(agentstate_put_lock(), hashtext(p_thread));
        PERFORM pg_advisory_unlock_shared(agentstate_put_lock(), hashtext(p_thread));
        IF v_thread IS NULL THEN
            INSERT INTO agentstate_thread AS t (thread_id, created_at, updated_at)
            VALUES (p_thread, now(), now())
            ON CONFLICT (thread_id) DO NOTHING
            RETURNING t.id INTO v_thread;
            IF v_thread IS NULL THEN
                SELECT id INTO v_thread FROM agentstate_thread WHERE thread_id = p_thread;
            END IF;
        END IF;
        SELECT c.id, c.writes INTO v_row, v_writes FROM agentstate_checkpoint c
        WHERE c.thread_id = v_thread AND c.checkpoint_ns = p_ns AND c.checkpoint_id = p_id
        FOR NO KEY UPDATE;
    END IF;
    IF v_row IS NOT NULL THEN
        IF v_writes IS NOT NULL AND NOT p_special AND position(p_writes IN v_writes) > 0 THEN
            RETURN '{}'::jsonb;
        END IF;
        IF coalesce(length(v_writes), 0) + length(p_writes) <= v_held THEN
            UPDATE agentstate_checkpoint SET writes = coalesce(writes, ''::bytea) || p_writes
            WHERE id = v_row;
            RETURN '{}'::jsonb;
        END IF;
        UPDATE agentstate_checkpoint SET writes = NULL WHERE id = v_row;
        p_writes := coalesce(v_writes, ''::bytea) || p_writes;
    END IF;
    -- the first write at each (task, idx), the last for a special channel's, as a read
    -- keeps them (one statement cannot write one row twice)
    INSERT INTO agentstate_checkpointwrite
        (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob)
    SELECT DISTINCT ON (x.task_id, x.idx)
           v_thread, p_ns, p_id, x.task_id, x.task_path, x.idx, x.channel, x.type, x.blob
    FROM agentstate_chain_writes(p_writes) WITH ORDINALITY AS x
    ORDER BY x.task_id, x.idx, CASE WHEN x.idx < 0 THEN -x.ordinality ELSE x.ordinality END
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE SET
        channel = EXCLUDED.channel, type = EXCLUDED.type, blob = EXCLUDED.blob,
        task_path = EXCLUDED.task_path
    WHERE EXCLUDED.idx < 0;
    RETURN '{}'::jsonb;
END $$;
