"""The EAGLE-3 contract: what vLLM's EAGLE-3 path uses on the target model
and on the draft model (the EAGLE-3 head), discovered from vLLM's source and
checked on the claimed architectures' classes.

Its modules import one way, each only from those before it:

- ``items``: the vLLM files read, the one table of claimed target and head
  architectures (which the build's manifest carries to the serving host),
  ``Item``, ``ContractError`` and the ``ast`` helpers both sides share;
- ``target``: the target side (the model runners, the proposer's
  ``load_model``, the speculative config gate);
- ``drafter``: the drafter side (the proposer's use of the head, the
  speculative-decoding registry);
- ``table``: the verdict table;
- ``probe``: the standard-library script that ``vpq.envs.contract_run``
  hands to an interpreter that imports vLLM (it imports nothing from
  ``vpq``).

The package reads vLLM's source with ``ast`` and imports nothing of ``vpq``
outside it but ``vpq.core``: discovery of both sides, the check in an
interpreter that imports vLLM, and its inputs (a wheel, a tree at a ref,
their CPU venvs) are ``vpq.envs.contract_run``, a layer above.

This file imports none of them, so ``vpq.contract.items`` can be imported
(by ``vpq.wheels.build``) without the rest.
"""
