# roshm image: roshmd, roshmctl, libroshm and the examples on Debian 12.
# The steps are scripts/image-build.sh, which `make test` also runs.
#   docker build -t roshm/roshmd:0.1.0 .
FROM debian:12 AS build
COPY . /src
RUN /src/scripts/image-build.sh build /out

FROM debian:12-slim
COPY scripts/image-build.sh scripts/deps.sh /tmp/roshm/
RUN /tmp/roshm/image-build.sh runtime && rm -rf /tmp/roshm /var/lib/apt/lists/*
COPY --from=build /out/ /
ENTRYPOINT ["roshmd"]
CMD ["-c", "/etc/roshm/roshmd.conf"]
