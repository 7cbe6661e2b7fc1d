"""The fab namespace: thin adapters over the firedup core."""

from invoke import Collection

from tasks import deploy, explain, ops, patches, plan

ns = Collection()
for _task in (
    deploy.deploy,
    plan.preflight,
    plan.plan,
    deploy.render,
    deploy.start,
    deploy.wait,
    ops.status,
    ops.stop,
    ops.logs,
    patches.sync_patches,
    explain.explain_log,
):
    ns.add_task(_task)
