"""Component provider host: serves TrainingPlatform (and TrainingJob when present) to other
Pulumi languages (`pulumi package add <this repo>`); the schema is inferred from the args'
annotations. PulumiPlugin.yaml runs this module."""

from pulumi.provider.experimental import component_provider_host


def components() -> list[type]:
    from trainforge.platform.training_platform import TrainingPlatform  # noqa: PLC0415

    found: list[type] = [TrainingPlatform]
    try:
        from trainforge.jobs.component import TrainingJob  # noqa: PLC0415
    except ImportError:
        pass
    else:
        found.append(TrainingJob)
    return found


def main() -> None:
    from trainforge.jobs import entrypoint  # noqa: PLC0415

    # Job paths are relative to the user's program directory, which this process cannot see.
    entrypoint.SERVED_TO_OTHER_LANGUAGES = True
    component_provider_host(components(), name="trainforge", namespace="trainforge")


if __name__ == "__main__":
    main()
