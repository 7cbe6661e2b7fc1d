"""The fab namespace: thin adapters over the firedup core."""

from invoke import Collection

from tasks import deploy, explain, history, lock, ops, patches, plan, smoke

ns = Collection()
for _task in (
    deploy.deploy,
    deploy.restart,
    plan.preflight,
    plan.plan,
    deploy.render,
    deploy.start,
    deploy.wait,
    ops.status,
    ops.stop,
    ops.logs,
    patches.sync_patches,
    smoke.smoke_test,
    history.history,
    lock.unlock,
    explain.explain_log,
):
    ns.add_task(_task)
