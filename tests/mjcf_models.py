"""Small MJCF models shared by several test modules."""

# A sphere on x / z slides resting on a plane, with a motor on each slide.
SLIDER_ON_PLANE = """
<mujoco><option timestep="0.005"/>
  <worldbody><geom type="plane" size="5 5 .1"/>
    <body pos="0 0 0.1">
      <joint name="x" type="slide" axis="1 0 0"/>
      <joint name="z" type="slide" axis="0 0 1"/>
      <geom type="sphere" size="0.1" mass="1"/>
    </body>
  </worldbody>
  <actuator><motor joint="x" gear="1"/><motor joint="z" gear="1"/></actuator>
</mujoco>"""
