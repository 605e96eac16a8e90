"""The options of a run that hold a local path (a file or folder, or a list of them), listed
once (:data:`PATH_OPTIONS`) for everything that treats paths apart:

- :func:`sts_core.training.output.run_inputs` lists the local paths the run reads (its
  ``input`` options), none of which may lie in what it deletes or writes over;
- :func:`sts_core.training.output.input_identities` records the content of those the
  trained result depends on (``identity``), and of a model option's hub id (``model``);
- :mod:`sts_core.training.resume_settings` records each of them resolved (an absolute path
  without symbolic links), so a relative and an absolute path to the same file agree.

The options come from ``ModelArguments``, ``DataArguments`` and ``TrainingArguments``
(``resume_from_checkpoint``, ``deepspeed``), whose fields carry no mark of their own, so
the list is kept here; ``test_path_options`` checks that each is a field of the run's
arguments.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PathOption:
    """An option whose value is a local path, a list of them, or (``model``) a hub id.

    ``split``: for a data option, the split a registry name in it is read from (None: the
    value is the path itself). ``model``: a model folder or a hub id. ``input``: a local
    path the run reads (:func:`~sts_core.training.output.run_inputs`). ``identity``: the
    trained weights depend on its content, which a checkpoint records
    (:func:`~sts_core.training.output.input_identities`)."""

    name: str
    split: str | None = None
    model: bool = False
    input: bool = True
    identity: bool = True


#: every path option, in the order the run's inputs are listed (and checked)
PATH_OPTIONS: tuple[PathOption, ...] = (
    PathOption("model_name_or_path", model=True),
    PathOption("teacher_model", model=True),
    # a resume checkpoint is checked by its save marker, not by its content
    PathOption("resume_from_checkpoint", identity=False),
    # the data folder as a whole: the sets read from it are listed one by one
    PathOption("data_dir", identity=False),
    PathOption("train_datasets", split="train"),
    PathOption("eval_dataset", split="dev"),
    # they score the final model only
    PathOption("final_eval_datasets", split="test", identity=False),
    PathOption("threshold_dataset", split="dev"),
    # a DeepSpeed settings file (or JSON text): recorded resolved, not an input
    PathOption("deepspeed", input=False, identity=False),
)

#: the names of :data:`PATH_OPTIONS`
PATH_OPTION_NAMES = frozenset(option.name for option in PATH_OPTIONS)
