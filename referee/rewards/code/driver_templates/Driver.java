// referee's function_tests driver (Java), placed after the program in the same file: the
// class run. It finds the method by reflection, reads each case's arguments from JSON into
// the method's own generic parameter types, and prints the result as JSON.
// Its placeholders are filled in.
final class RefereeDriver {
  public static void main(String[] referee) throws Exception {
    java.io.BufferedReader in = new java.io.BufferedReader(
        new java.io.InputStreamReader(System.in, java.nio.charset.StandardCharsets.UTF_8));
    String line = in.readLine();
    String text = arguments(Integer.parseInt(line == null ? "" : line.trim()));
    if (text == null) {
      System.err.println("referee: no such case");
      System.exit(2);
    }
    Class<?> owner = @OWNER@.class;
    java.lang.reflect.Method method = null;
    for (java.lang.reflect.Method m : owner.getDeclaredMethods()) {
      if (m.getName().equals("@NAME@") && m.getParameterCount() == @ARITY@) method = m;
    }
    if (method == null) {
      System.err.println("no method @NAME@ of @ARITY@ parameters in @OWNER@");
      System.exit(3);
    }
    method.setAccessible(true);
    java.util.List<?> values = (java.util.List<?>) new Json(text).value();
    java.lang.reflect.Type[] types = method.getGenericParameterTypes();
    Object[] actual = new Object[types.length];
    for (int i = 0; i < types.length; i++) actual[i] = convert(values.get(i), types[i]);
    Object target = null;
    if (!java.lang.reflect.Modifier.isStatic(method.getModifiers())) {
      java.lang.reflect.Constructor<?> make = owner.getDeclaredConstructor();
      make.setAccessible(true);
      target = make.newInstance();
    }
    Object result;
    try {
      result = method.invoke(target, actual);
    } catch (java.lang.reflect.InvocationTargetException e) {
      Throwable cause = e.getCause();
      cause.printStackTrace();
      System.err.println(cause);
      System.exit(1);
      return;
    }
    StringBuilder out = new StringBuilder();
    emit(out, method.getReturnType() == void.class ? null : result);
    System.out.flush();
    System.out.print("\n@MARKER@\n" + out + "\n");
    System.out.flush();
  }

  static String arguments(int index) {
    switch (index) {
@CASES@
      default: return null;
    }
  }

  static final class Num {
    final String text;
    Num(String text) { this.text = text; }
  }

  static final class Json {
    final String s;
    int i;
    Json(String s) { this.s = s; }

    Object value() {
      char c = s.charAt(i);
      if (c == '[') {
        java.util.List<Object> list = new java.util.ArrayList<>();
        i++;
        if (s.charAt(i) == ']') { i++; return list; }
        while (true) {
          list.add(value());
          if (s.charAt(i++) == ']') return list;
        }
      }
      if (c == '{') {
        java.util.Map<String, Object> map = new java.util.LinkedHashMap<>();
        i++;
        if (s.charAt(i) == '}') { i++; return map; }
        while (true) {
          String key = string();
          i++;
          map.put(key, value());
          if (s.charAt(i++) == '}') return map;
        }
      }
      if (c == '"') return string();
      if (s.startsWith("true", i)) { i += 4; return Boolean.TRUE; }
      if (s.startsWith("false", i)) { i += 5; return Boolean.FALSE; }
      if (s.startsWith("null", i)) { i += 4; return null; }
      int start = i;
      while (i < s.length() && ",]}:".indexOf(s.charAt(i)) < 0) i++;
      return new Num(s.substring(start, i));
    }

    String string() {
      StringBuilder b = new StringBuilder();
      i++;
      while (true) {
        char c = s.charAt(i++);
        if (c == '"') return b.toString();
        if (c != '\\') { b.append(c); continue; }
        char e = s.charAt(i++);
        switch (e) {
          case 'n': b.append('\n'); break;
          case 't': b.append('\t'); break;
          case 'r': b.append('\r'); break;
          case 'b': b.append('\b'); break;
          case 'f': b.append('\f'); break;
          case 'u': b.append((char) Integer.parseInt(s.substring(i, i + 4), 16)); i += 4; break;
          default: b.append(e);
        }
      }
    }
  }

  static String text(Object v) {
    if (v instanceof Num) return ((Num) v).text;
    throw new IllegalArgumentException("referee: " + v + " is not a number");
  }

  static Object scalar(Object v, Class<?> c) {
    if (c == int.class || c == Integer.class) return Integer.valueOf(text(v));
    if (c == long.class || c == Long.class) return Long.valueOf(text(v));
    if (c == short.class || c == Short.class) return Short.valueOf(text(v));
    if (c == byte.class || c == Byte.class) return Byte.valueOf(text(v));
    if (c == double.class || c == Double.class) return Double.valueOf(text(v));
    if (c == float.class || c == Float.class) return Float.valueOf(text(v));
    if (c == boolean.class || c == Boolean.class) return (Boolean) v;
    if (c == char.class || c == Character.class) return ((String) v).charAt(0);
    if (c == String.class) return (String) v;
    throw new IllegalArgumentException("referee: cannot pass a value as " + c);
  }

  static Object key(String k, java.lang.reflect.Type t) {
    if (t == Integer.class) return Integer.valueOf(k);
    if (t == Long.class) return Long.valueOf(k);
    if (t == Character.class) return k.charAt(0);
    return k;
  }

  @SuppressWarnings("unchecked")
  static Object convert(Object v, java.lang.reflect.Type t) {
    if (t instanceof Class && ((Class<?>) t).isArray()) {
      Class<?> item = ((Class<?>) t).getComponentType();
      java.util.List<?> list = (java.util.List<?>) v;
      Object array = java.lang.reflect.Array.newInstance(item, list.size());
      for (int k = 0; k < list.size(); k++) {
        java.lang.reflect.Array.set(array, k, convert(list.get(k), item));
      }
      return array;
    }
    if (t instanceof Class) return scalar(v, (Class<?>) t);
    java.lang.reflect.ParameterizedType p = (java.lang.reflect.ParameterizedType) t;
    Class<?> raw = (Class<?>) p.getRawType();
    java.lang.reflect.Type[] of = p.getActualTypeArguments();
    if (java.util.Map.class.isAssignableFrom(raw)) {
      java.util.Map<Object, Object> map = raw == java.util.TreeMap.class
          ? new java.util.TreeMap<>() : new java.util.HashMap<>();
      for (java.util.Map.Entry<String, Object> e : ((java.util.Map<String, Object>) v).entrySet()) {
        map.put(key(e.getKey(), of[0]), convert(e.getValue(), of[1]));
      }
      return map;
    }
    java.util.Collection<Object> items;
    if (java.util.Set.class.isAssignableFrom(raw)) items = new java.util.HashSet<>();
    else if (raw == java.util.LinkedList.class) items = new java.util.LinkedList<>();
    else items = new java.util.ArrayList<>();
    for (Object item : (java.util.List<?>) v) items.add(convert(item, of[0]));
    return items;
  }

  static void string(StringBuilder o, String s) {
    o.append('"');
    for (int k = 0; k < s.length(); k++) {
      char c = s.charAt(k);
      if (c == '"' || c == '\\') o.append('\\').append(c);
      else if (c < 0x20 || c > 0x7e) o.append(String.format("\\u%04x", (int) c));
      else o.append(c);
    }
    o.append('"');
  }

  static void emit(StringBuilder o, Object v) {
    if (v == null) {
      o.append("null");
    } else if (v instanceof Boolean) {
      o.append(v);
    } else if (v instanceof Character || v instanceof String || v instanceof Enum) {
      string(o, v.toString());
    } else if (v instanceof Double || v instanceof Float) {
      double d = ((Number) v).doubleValue();
      if (Double.isNaN(d)) o.append("NaN");
      else if (Double.isInfinite(d)) o.append(d > 0 ? "Infinity" : "-Infinity");
      else o.append(v);
    } else if (v instanceof Number) {
      o.append(v);
    } else if (v.getClass().isArray()) {
      o.append('[');
      for (int k = 0; k < java.lang.reflect.Array.getLength(v); k++) {
        if (k > 0) o.append(',');
        emit(o, java.lang.reflect.Array.get(v, k));
      }
      o.append(']');
    } else if (v instanceof java.util.Map) {
      o.append('{');
      boolean first = true;
      for (java.util.Map.Entry<?, ?> e : ((java.util.Map<?, ?>) v).entrySet()) {
        if (!first) o.append(',');
        first = false;
        string(o, String.valueOf(e.getKey()));
        o.append(':');
        emit(o, e.getValue());
      }
      o.append('}');
    } else if (v instanceof Iterable) {
      o.append('[');
      boolean first = true;
      for (Object item : (Iterable<?>) v) {
        if (!first) o.append(',');
        first = false;
        emit(o, item);
      }
      o.append(']');
    } else if (v instanceof java.util.Optional) {
      emit(o, ((java.util.Optional<?>) v).orElse(null));
    } else {
      throw new IllegalArgumentException("referee: cannot print a " + v.getClass() + " as JSON");
    }
  }
}
