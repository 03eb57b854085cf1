"""The user's actions on receipts: answer, cancel, accept, reject, new call.

A mixin of ``ChitApp`` so ``app.py`` stays small. Each action asks the current screen
which receipt is selected, confirms destructive steps in a typed modal, and runs the
Supervisor call through ``ChitApp.submit`` (a thread worker; errors become toasts).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chit.receipts import Receipt

if TYPE_CHECKING:
    from chit.tui.app import ChitApp
    from chit.tui.view import Question

MUTATING = {"answer", "cancel_task", "accept", "reject", "new_call"}
"""Actions that change something: greyed out while read-only."""


class ActionsMixin:
    """Receipt actions for :class:`~chit.tui.app.ChitApp`."""

    def _app(self) -> ChitApp:
        return self  # type: ignore[return-value]

    def selected(self) -> Receipt | None:
        """The receipt the current screen has selected, if any."""
        screen: Any = self._app().screen
        getter = getattr(screen, "selected_receipt", None)
        return getter() if callable(getter) else None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Grey out (None) what read-only mode forbids; hide nothing."""
        if action in MUTATING and self._app().readonly:
            return None
        return True

    def _need(self, receipt: Receipt | None, verb: str) -> Receipt | None:
        app = self._app()
        if app.readonly:
            app.notify(f"read-only: cannot {verb}", severity="warning")
            return None
        if receipt is None:
            app.notify(f"Select a receipt to {verb}.", severity="warning")
        return receipt

    def _done(self, text: str) -> Any:
        app = self._app()

        def finish(_: object) -> None:
            app.notify(text)
            app.refresh_data()

        return finish

    # ---------------------------------------------------------------- screens
    def action_help(self) -> None:
        """Show every key, its keymap id and the filter grammar."""
        from chit.tui.screens.help import HelpScreen

        self._app().push_screen(HelpScreen())

    def action_inbox(self) -> None:
        """Open the inbox of prompts waiting for an answer."""
        from chit.tui.screens.inbox import InboxScreen

        app = self._app()
        if not isinstance(app.screen, InboxScreen):
            app.push_screen(InboxScreen())

    def action_servers(self) -> None:
        """Open the servers screen."""
        from chit.tui.screens.servers import ServersScreen

        self._app().push_screen(ServersScreen())

    def action_open_detail(self) -> None:
        """Open the selected receipt on its own screen."""
        from chit.tui.screens.detail import DetailScreen

        receipt = self.selected()
        if receipt is not None:
            self._app().push_screen(DetailScreen(receipt.receipt_id))

    def action_filter(self) -> None:
        """Focus the filter (on the main screen)."""
        app = self._app()
        while len(app.screen_stack) > 2:
            app.pop_screen()
        app.call_later(app.screen.run_action, "filter")

    def action_reconcile(self) -> None:
        """Check every live receipt now."""
        app = self._app()
        app.submit(
            app.backend.reconcile_now, description="Reconcile", done=self._done("Reconciled")
        )

    # ---------------------------------------------------------------- receipts
    def action_answer(self, key: str | None = None) -> None:
        """Answer a pending prompt of the selected receipt."""
        from chit.tui.screens.answer import AnswerScreen, Ask
        from chit.tui.screens.inbox import InboxScreen

        screen = self._app().screen
        if key is None and isinstance(screen, InboxScreen):
            # In the inbox the highlighted row may be an agent question, not a receipt.
            screen.action_answer_selected()
            return
        receipt = self._need(self.selected(), "answer")
        if receipt is None:
            return
        pending = [r for r in receipt.pending_inputs if key is None or r.key == key]
        app = self._app()
        if not pending:
            app.notify("Nothing to answer: no pending prompt on this receipt.", severity="warning")
            return
        request = pending[0]

        def send(result: tuple[str, dict[str, Any] | None] | None) -> None:
            if result is None:
                return
            action, content = result
            app.submit(
                app.backend.answer,
                receipt.receipt_id,
                request.key,
                action,
                content,
                description="Answer",
                done=self._done(f"Answer sent ({action})"),
            )

        app.push_screen(AnswerScreen(Ask.for_request(receipt, request)), send)

    def answer_question(self, question: Question) -> None:
        """Answer an agent's ``work_ask`` question with the same form and rules.

        Accept sends the content to the sidecar (a schemaless question gets the text of
        its one field); decline and cancel both withdraw it, which is the one way the
        sidecar has to end a question without an answer.
        """
        from chit.tui.screens.answer import FREE_TEXT, AnswerScreen, Ask

        app = self._app()
        if app.readonly:
            app.notify("read-only: cannot answer", severity="warning")
            return

        def send(result: tuple[str, dict[str, Any] | None] | None) -> None:
            if result is None:
                return
            action, content = result
            if action != "accept":
                app.submit(
                    app.backend.withdraw,
                    question.decision_id,
                    description="Withdraw question",
                    done=self._done(f"Question withdrawn ({action})"),
                )
                return
            answer: Any = content
            if question.schema is None and content is not None:
                answer = content.get(FREE_TEXT)
            app.submit(
                app.backend.decide,
                question.decision_id,
                answer,
                description="Answer question",
                done=self._done("Answer sent to the agent"),
            )

        app.push_screen(AnswerScreen(Ask.for_question(question)), send)

    def action_cancel_task(self) -> None:
        """Ask for confirmation, then ask the server to cancel the selected task."""
        from chit.tui.screens.confirm import ConfirmScreen

        receipt = self._need(self.selected(), "cancel")
        if receipt is None:
            return
        app = self._app()
        if receipt.is_terminal:
            app.notify(f"Already {receipt.state.value}: nothing to cancel.", severity="warning")
            return
        question = (
            f"Cancel {receipt.server}/{receipt.tool} ({receipt.receipt_id[-6:]})?\n\n"
            "Cancellation is cooperative: the server may still complete the work. "
            "chit records when you asked and what it then observes."
        )

        def confirmed(yes: bool | None) -> None:
            if yes:
                app.submit(
                    app.backend.cancel,
                    receipt.receipt_id,
                    description="Cancel",
                    done=self._done("Cancel requested"),
                )

        app.push_screen(ConfirmScreen(question, yes="Cancel task", no="Keep running"), confirmed)

    def action_accept(self) -> None:
        """Accept the selected terminal outcome."""
        receipt = self._need(self.selected(), "accept")
        if receipt is None:
            return
        app = self._app()
        app.submit(
            app.backend.accept,
            receipt.receipt_id,
            description="Accept",
            done=self._done("Outcome accepted"),
        )

    def action_reject(self) -> None:
        """Reject the selected terminal outcome with a reason."""
        from chit.tui.screens.confirm import ReasonScreen

        receipt = self._need(self.selected(), "reject")
        if receipt is None:
            return
        app = self._app()

        def send(why: str | None) -> None:
            if why:
                app.submit(
                    app.backend.reject,
                    receipt.receipt_id,
                    why,
                    description="Reject",
                    done=self._done("Outcome rejected"),
                )

        app.push_screen(
            ReasonScreen(f"Reject the outcome of {receipt.receipt_id[-6:]}: why?"), send
        )

    def action_new_call(self) -> None:
        """Open the new-call screen; start the call it returns."""
        from chit.tui.screens.new_call import CallRequest, NewCallScreen

        app = self._app()
        if app.readonly:
            app.notify("read-only: cannot start a call", severity="warning")
            return

        def start(request: CallRequest | None) -> None:
            if request is not None:
                app.submit(
                    app.backend.call,
                    request.server,
                    request.tool,
                    request.arguments,
                    request.purpose,
                    request.work_ref,
                    description="Start call",
                    done=self._done(f"Started {request.tool}"),
                )

        app.push_screen(NewCallScreen(), start)
