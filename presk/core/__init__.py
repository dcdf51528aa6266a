"""PSK-Core over the primitives: building its functions (`build`), the module read once
for the executors (`program`), and its readable text (`text`)."""
