"""Every concurrency row, on each backend (see conftest.py): the suite's own tests of
them, collected here once more under each backend the database supports.

Real threads with their own connections, started together by a barrier
(``concurrently``); two server processes for the claims across nodes.
"""

import pytest

from tests.bridges.test_langgraph_bridge import (  # noqa: F401
    reviewer,
    test_an_answer_and_a_resume_at_once_resume_once,
    test_two_answers_at_once_resume_once,
    test_two_questions_answered_at_once_resume_once,
    test_two_resumes_at_once_run_the_tool_once,
)
from tests.bridges.test_langgraph_saver import (  # noqa: F401
    test_a_graph_runs_resumes_and_keeps_its_history,
    test_a_node_asking_twice_resumes_to_its_end,
    test_a_second_writer_on_the_same_parent_is_noticed,
    test_the_conformance_suite_passes_every_capability,
)
from tests.bridges.test_langgraph_store import (  # noqa: F401
    store,
    test_a_namespace_is_a_scope_and_a_key_a_variable,
    test_a_read_refreshes_the_ttl,
    test_an_expired_item_is_never_read_even_unswept,
    test_an_items_times_are_the_databases_whatever_the_clock_of_its_process,
    test_the_sweep_deletes_expired_items_in_batches_and_keeps_the_rest,
)
from tests.concurrency.test_budgets_concurrency import (  # noqa: F401 - collected here
    test_setting_caps_while_adding_never_deadlocks_and_keeps_budgets_with_the_runs,
    test_twenty_rest_clients_get_409_budget_exceeded_past_the_shared_cap,
    test_twenty_workers_against_a_run_budget_use_exactly_the_cap,
    test_twenty_workers_on_several_runs_of_one_user_share_its_budget_exactly,
)
from tests.concurrency.test_context_concurrency import (  # noqa: F401
    test_20_workers_x_100_pushes_leave_exactly_2000_elements,
    test_a_pop_that_waited_for_a_push_sees_the_pushed_element,
    test_concurrent_creation_with_if_version_0_lets_exactly_one_win,
    test_concurrent_pops_return_every_element_exactly_once,
    test_concurrent_pushes_to_an_absent_variable_in_an_absent_scope_create_it_once,
    test_concurrent_puts_with_if_version_let_exactly_one_win,
    test_pushes_racing_pops_lose_and_duplicate_nothing,
)
from tests.concurrency.test_pauses_concurrency import (  # noqa: F401
    test_claim_racing_the_sweeper_is_claimed_or_expired_never_both,
    test_fifty_threads_claiming_one_pause_exactly_one_wins,
    test_fifty_threads_re_pausing_one_call_leave_one_pending_pause,
)
from tests.concurrency.test_pauses_processes import (  # noqa: F401
    test_two_server_processes_let_exactly_one_of_fifty_claims_win,
)
from tests.concurrency.test_policies_concurrency import (  # noqa: F401
    test_a_request_filed_while_a_revocation_commits_is_left_pending,
    test_a_revocation_waits_for_the_request_its_policy_is_deciding,
    test_a_revoked_policy_decides_nothing_filed_after_its_revocation,
)
from tests.concurrency.test_runs_concurrency import (  # noqa: F401
    test_approve_and_reject_racing_on_one_request_store_one_decision,
    test_decide_request_and_rebuild_on_one_run_never_deadlock,
    test_twenty_threads_adding_usage_lose_no_update,
    test_twenty_threads_writing_one_run_take_turns,
    test_two_creators_of_one_run_id_one_wins_the_other_is_told_it_exists,
)

pytestmark = pytest.mark.django_db(transaction=True)
