from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tenants", "0003_tenant_gpu_hour_price"),
    ]

    operations = [
        migrations.AddField(
            model_name="tenant",
            name="job_retention_days",
            field=models.PositiveIntegerField(
                blank=True,
                help_text="Ended jobs older than this many days are deleted with their checkpoints "
                "(the usage ledger is kept); empty: jobs are kept until deleted.",
                null=True,
            ),
        ),
    ]
