"""The person's actions: open screens, answer, cancel, judge, undo, start a call.

A mixin of ``ChitApp`` so ``app.py`` stays small. Each action asks the current screen
which receipt is selected, confirms what deserves it in a typed modal, and runs the
engine call in an app-owned worker: a cancel or an answer the person confirmed is sent
even if they leave the screen meanwhile (its result is a toast and the model update).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual.screen import Screen

from chit.receipts import LifecycleState, Receipt, is_success

if TYPE_CHECKING:
    from chit.tui.app import ChitApp
    from chit.tui.view import Question


class ActionsMixin:
    """Receipt actions for :class:`~chit.tui.app.ChitApp`."""

    def _app(self) -> ChitApp:
        return self  # type: ignore[return-value]

    def selected(self) -> Receipt | None:
        """The receipt the current screen has selected, if any."""
        getter = getattr(self._app().screen, "selected_receipt", None)
        return getter() if callable(getter) else None

    def _allowed(self, action: str) -> bool:
        """The same rule as the footer: a key that is not shown does nothing."""
        app = self._app()
        verdict = app.allows(action, app.screen)
        if verdict is None:
            app.notify("Read-only: nothing can be changed here.", severity="warning")
        return bool(verdict)

    def _done(self, text: str) -> Any:
        app = self._app()

        def finish(result: object) -> None:
            app.apply_receipt(result)
            app.check_now()  # questions and records live outside the engine's events
            app.notify(text)

        return finish

    def open_screen(self, screen: Screen[Any]) -> None:
        """Show ``screen``, never a second one of its kind: go back to the one open."""
        app = self._app()
        kind = type(screen)
        stack = app.screen_stack
        for depth, open_screen in enumerate(stack):
            if type(open_screen) is kind:
                for _ in range(len(stack) - depth - 1):
                    app.pop_screen()
                # A screen about one thing (a receipt, a server) gives way to the new one.
                about = ("receipt_id", "server_name")
                if any(hasattr(open_screen, a) for a in about) and open_screen is not screen:
                    app.pop_screen()
                    app.push_screen(screen)
                return
        app.push_screen(screen)

    # ---------------------------------------------------------------- screens
    def action_help(self) -> None:
        """Show every key, its keymap id and the filter grammar."""
        from chit.tui.screens.help import HelpScreen

        if self._allowed("help"):
            self._app().push_screen(HelpScreen())

    def action_protocol_log(self) -> None:
        """Open the protocol log of the selected server (or the selected receipt's)."""
        from chit.tui.screens.protocol_log import ProtocolLogScreen

        getter = getattr(self._app().screen, "selected_server", None)
        server = getter() if callable(getter) else None
        if server is not None and self._allowed("protocol_log"):
            self.open_screen(ProtocolLogScreen(server))

    def action_inbox(self) -> None:
        """Open the inbox of prompts waiting for an answer."""
        from chit.tui.screens.inbox import InboxScreen

        if self._allowed("inbox"):
            self.open_screen(InboxScreen())

    def action_servers(self) -> None:
        """Open the servers screen."""
        from chit.tui.screens.servers import ServersScreen

        if self._allowed("servers"):
            self.open_screen(ServersScreen())

    def action_open_detail(self) -> None:
        """Open the selected receipt on its own screen."""
        from chit.tui.screens.detail import DetailScreen

        receipt = self.selected()
        if receipt is not None:
            self.open_screen(DetailScreen(receipt.receipt_id))

    def action_reconcile(self) -> None:
        """Check every live receipt now, then read everything again."""
        app = self._app()
        if not self._allowed("reconcile"):
            return

        def finish(_: object) -> None:
            app.refresh_data()
            app.notify("Reconciled")

        app.submit(app.backend.reconcile_now, description="Reconcile", done=finish)

    # ---------------------------------------------------------------- receipts
    def action_answer(self, key: str | None = None) -> None:
        """Answer a pending prompt of the selected receipt (or the inbox's row)."""
        from chit.tui.screens.answer import AnswerScreen, Ask
        from chit.tui.screens.inbox import InboxScreen

        app = self._app()
        if not self._allowed("answer"):
            return
        screen = app.screen
        if key is None and isinstance(screen, InboxScreen):
            # In the inbox the highlighted row may be an agent question, not a receipt.
            screen.action_answer_selected()
            return
        receipt = self.selected()
        if receipt is None:
            return
        pending = [r for r in receipt.pending_inputs if key is None or r.key == key]
        if not pending:
            # The server's input_required status can arrive a poll before its question.
            waiting = receipt.state is LifecycleState.INPUT_REQUIRED and key is None
            app.notify(
                "The server's question has not reached chit yet: try again in a moment."
                if waiting
                else "Nothing to answer: no pending prompt on this receipt.",
                severity="warning",
            )
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
                done=self._done(SENT[action]),
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
        if not self._allowed("answer"):
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
                    done=self._done("Question withdrawn: the asking task ends"),
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

        receipt = self.selected()
        if receipt is None or not self._allowed("cancel_task"):
            return
        app = self._app()
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
        """Show the outcome, then accept it (an error result is confirmed twice)."""
        from chit.tui.screens.confirm import ConfirmScreen
        from chit.tui.screens.verdict import AcceptScreen

        receipt = self.selected()
        if receipt is None or not self._allowed("accept"):
            return
        app = self._app()
        before = receipt.acceptance

        def record() -> None:
            def finish(result: object) -> None:
                self._done("Outcome accepted (u to undo)")(result)
                if isinstance(result, Receipt):
                    app.remember_verdict(result, before)

            app.submit(app.backend.accept, receipt.receipt_id, description="Accept", done=finish)

        def again(yes: bool | None) -> None:
            if yes:
                record()

        def previewed(yes: bool | None) -> None:
            if not yes:
                return
            if is_success(receipt):
                record()
                return
            app.push_screen(
                ConfirmScreen(
                    "This outcome is an error, not a result.\n\n"
                    "Accepting it tells the agent the work is done as it is. Accept anyway?",
                    yes="Accept the error",
                    no="Back",
                ),
                again,
            )

        app.push_screen(AcceptScreen(receipt), previewed)

    def action_reject(self) -> None:
        """Reject the selected terminal outcome with a reason."""
        from chit.tui.screens.confirm import ReasonScreen

        receipt = self.selected()
        if receipt is None or not self._allowed("reject"):
            return
        app = self._app()
        before = receipt.acceptance

        def send(why: str | None) -> None:
            if not why:
                return

            def finish(result: object) -> None:
                self._done("Outcome rejected (u to undo)")(result)
                if isinstance(result, Receipt):
                    app.remember_verdict(result, before)

            app.submit(
                app.backend.reject, receipt.receipt_id, why, description="Reject", done=finish
            )

        app.push_screen(
            ReasonScreen(f"Reject the outcome of {receipt.receipt_id[-6:]}: why?"), send
        )

    def action_undo(self) -> None:
        """Take back the last verdict (within a short window)."""
        app = self._app()
        last = app.last_verdict
        if last is None or not self._allowed("undo"):
            return
        receipt_id, before, _ = last
        app.last_verdict = None
        app.refresh_bindings()
        app.submit(
            app.backend.undo_verdict,
            receipt_id,
            before,
            description="Undo verdict",
            done=self._done(f"Verdict taken back: {before.state.value} again"),
        )

    def action_new_call(self) -> None:
        """Open the new-call screen; start the call it returns."""
        from chit.tui.screens.new_call import CallRequest, NewCallScreen

        app = self._app()
        if not self._allowed("new_call"):
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

        # ``new_call`` only works where no new-call screen is open (context.allowed).
        app.push_screen(NewCallScreen(), start)


SENT = {
    "accept": "Answer sent",
    "decline": "Declined: the server was told you will not answer",
    "cancel": "Request cancelled: the server was told to drop it",
}
"""The toast after each kind of answer."""
